package gate

import (
	"testing"
	"time"
)

// TestSenderSteps takes signals at explicit times (interval 100ms) and checks the quota per
// interval, the sequence numbers and when the gate counts as joining.
func TestSenderSteps(t *testing.T) {
	const iv = 100 * time.Millisecond
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	var s sender
	if !s.joining(t0, iv) {
		t.Errorf("a gate that made no signal is not joining, want joining")
	}
	for i := range maxSent {
		if seq, ok := s.next(t0.Add(time.Duration(i)*ms), iv); !ok || seq != uint64(i+1) {
			t.Fatalf("signal %d: seq %d ok %v, want %d true", i, seq, ok, i+1)
		}
	}
	steps := []struct {
		name    string
		at      time.Duration
		ok      bool
		seq     uint64
		joining bool
	}{
		{"beyond the quota", 50 * ms, false, 0, true},
		{"still beyond it at the end of the interval", 99 * ms, false, 0, true},
		{"a new interval", 100 * ms, true, maxSent + 1, true},
		{"joining ends two intervals after the first signal", 200 * ms, true, maxSent + 2, false},
	}
	for _, st := range steps {
		seq, ok := s.next(t0.Add(st.at), iv)
		if ok != st.ok || seq != st.seq {
			t.Errorf("%s: seq %d ok %v, want %d %v", st.name, seq, ok, st.seq, st.ok)
		}
		if got := s.joining(t0.Add(st.at), iv); got != st.joining {
			t.Errorf("%s: joining %v, want %v", st.name, got, st.joining)
		}
	}
}
