package gate

import (
	"slices"
	"testing"
	"time"
)

// TestWindowSteps grows and halves a window step by step: slow start adds one per two successes
// (half a window per round: 2, 3, 4, 6, 9, 14, the rounds of a healthy 30-burst); above ssthresh
// one per window of successes; a halving sets ssthresh.
func TestWindowSteps(t *testing.T) {
	type step struct {
		op   string // "grow" (n successes) or "halve"
		n    int
		size int // after the step
		grew bool
	}
	tests := []struct {
		name     string
		initial  int
		maxSize  int
		steps    []step
		ssthresh int // at the end
	}{
		{"slow start grows by half a round", 2, 1024, []step{{"grow", 2, 3, true}, {"grow", 3, 4, true}, {"grow", 4, 6, true}, {"grow", 6, 9, true}, {"grow", 9, 14, true}}, 1024},
		{"one success is half a step", 2, 1024, []step{{"grow", 1, 2, false}, {"grow", 1, 3, true}}, 1024},
		{"halve sets ssthresh", 2, 1024, []step{{"grow", 20, 12, true}, {"halve", 0, 6, false}}, 6},
		{"above ssthresh one per window", 2, 1024, []step{{"grow", 20, 12, true}, {"halve", 0, 6, false}, {"grow", 5, 6, false}, {"grow", 1, 7, true}, {"grow", 7, 8, true}}, 6},
		{"never below 1", 1, 1024, []step{{"halve", 0, 1, false}, {"halve", 0, 1, false}}, 1},
		{"capped at the maximum", 2, 4, []step{{"grow", 100, 4, true}, {"grow", 100, 4, false}}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindow(tt.initial, tt.maxSize)
			for i, s := range tt.steps {
				grew := false
				if s.op == "grow" {
					grew = w.grow(s.n, tt.maxSize)
				} else {
					w.halve()
				}
				if w.size != s.size || grew != s.grew {
					t.Errorf("step %d (%s %d): size %d grew %v, want %d %v", i, s.op, s.n, w.size, grew, s.size, s.grew)
				}
			}
			if w.ssthresh != tt.ssthresh {
				t.Errorf("ssthresh %d, want %d", w.ssthresh, tt.ssthresh)
			}
		})
	}
}

// TestWindowLeases checks the permits in flight: a release counts once, an expired lease frees its
// slot and its later report does not count again.
func TestWindowLeases(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWindow(2, 1024)
	var ids []uint64
	for i := range 3 {
		ids = append(ids, w.take(t0.Add(time.Duration(i)*time.Second)))
	}
	if !slices.Equal(ids, []uint64{1, 2, 3}) || w.inflight != 3 {
		t.Fatalf("ids %v in flight %d, want [1 2 3] 3", ids, w.inflight)
	}
	steps := []struct {
		name     string
		do       func() bool
		want     bool
		inflight int
	}{
		{"release the second", func() bool { return w.release(2) }, true, 2},
		{"release it again", func() bool { return w.release(2) }, false, 2},
		{"release an unknown id", func() bool { return w.release(9) }, false, 2},
		{"expire the first lease", func() bool { w.expire(t0); return true }, true, 1},
		{"report the expired one", func() bool { return w.release(1) }, false, 1},
		{"release the third", func() bool { return w.release(3) }, true, 0},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want || w.inflight != s.inflight {
			t.Errorf("%s: got %v in flight %d, want %v %d", s.name, got, w.inflight, s.want, s.inflight)
		}
	}
	if _, ok := w.slots.oldest(); ok {
		t.Errorf("a slot is still outstanding after every permit was released")
	}
}
