package gate

import (
	"testing"
	"time"
)

// TestHoldsSteps applies pushes, Retry-Afters, refinements and peers' holds at explicit times and
// checks where the holds leave the next start.
func TestHoldsSteps(t *testing.T) {
	const w = 8 * time.Second // the widest spacing
	s := time.Second
	type step struct {
		at    time.Duration // since t0
		op    string        // "push" (arg: spacing), "retry" (arg: Retry-After), "refine" (arg: spacing), "peer" (arg: Retry-After)
		arg   time.Duration
		until time.Duration // the hold after the step, since t0
		own   time.Duration // ...and this gate's own part (the one a budget is checked against)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a push holds for a spacing", []step{{0, "push", s, s, s}, {500 * time.Millisecond, "push", s, 1500 * time.Millisecond, 1500 * time.Millisecond}}},
		{"a push never moves the hold back", []step{{0, "push", 4 * s, 4 * s, 4 * s}, {time.Second, "push", s, 4 * s, 4 * s}}},
		{"Retry-After wins over a push", []step{{0, "retry", 5 * s, 5 * s, 5 * s}, {0, "push", s, 5 * s, 5 * s}}},
		{"refine brings a push down", []step{{0, "push", 4 * s, 4 * s, 4 * s}, {100 * time.Millisecond, "refine", s, s, s}}},
		{"refine keeps a Retry-After", []step{{0, "retry", 3 * s, 3 * s, 3 * s}, {0, "push", 4 * s, 4 * s, 4 * s}, {0, "refine", s, 3 * s, 3 * s}}},
		{"a peer's Retry-After holds this gate, not its own part", []step{{0, "peer", 2 * s, 2 * s, 0}}},
		{"a peer's hold is cut at the widest spacing", []step{{0, "peer", time.Minute, w, 0}}},
		{"peers hold at most w in any 4w", []step{{0, "peer", w, w, 0}, {w, "peer", w, w, 0}, {2 * w, "peer", w, w, 0}, {4 * w, "peer", w, 5 * w, 0}}},
	}
	t0 := time.Unix(1000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h holds
			for i, st := range tt.steps {
				now := t0.Add(st.at)
				switch st.op {
				case "push":
					h.push(now, st.arg)
				case "retry":
					h.retryAfter(now.Add(st.arg))
				case "refine":
					h.refine(st.arg)
				case "peer":
					h.peerUntil(now, now.Add(st.arg), w, 1)
				}
				if got := h.until().Sub(t0); got != st.until {
					t.Errorf("step %d (%s %v at %v): held until %v, want %v", i, st.op, st.arg, st.at, got, st.until)
				}
				if got := max(h.own.Sub(t0), 0); got != st.own {
					t.Errorf("step %d (%s %v at %v): own hold until %v, want %v", i, st.op, st.arg, st.at, got, st.own)
				}
			}
		})
	}
}
