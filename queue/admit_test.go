package queue

import (
	"testing"
	"time"
)

// TestRefusalLogOncePerMinute: the first refusal is logged, the next ones within a minute are
// not, and the line after a minute counts every refusal since the last line.
func TestRefusalLogOncePerMinute(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	steps := []struct {
		name  string
		at    time.Duration
		log   bool
		count uint64
	}{
		{"the first is logged", 0, true, 1},
		{"one second later: quiet", time.Second, false, 0},
		{"59s later: quiet", 59 * time.Second, false, 0},
		{"a minute later: logged, counting three", time.Minute, true, 3},
		{"just after: quiet", time.Minute + time.Millisecond, false, 0},
		{"two minutes later: logged, counting two", 2 * time.Minute, true, 2},
	}
	var l refusalLog
	for _, s := range steps {
		n, ok := l.due(t0.Add(s.at))
		if ok != s.log || n != s.count {
			t.Errorf("%s: got (%d, %v), want (%d, %v)", s.name, n, ok, s.count, s.log)
		}
	}
}
