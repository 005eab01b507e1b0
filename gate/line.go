package gate

import (
	"slices"
	"time"
)

// line is the callers waiting in an Adaptive gate, in arrival order: a retry keeps its first
// arrival, so it goes before the callers that came after it, and before those that came with it
// but have not started yet. adaptive.mu guards it.
type line []*waiter

// waiter is one caller queued in wait.
type waiter struct {
	arrival time.Time
	wake    chan struct{} // buffered(1): "something changed, look again"
	probe   bool          // the closed origin's prober
	retry   bool          // refused already (see adaptive.demand)
}

// insert puts w in its place by arrival; retry: before the equal arrivals.
func (l *line) insert(w *waiter, retry bool) {
	i, _ := slices.BinarySearchFunc(*l, w.arrival, func(x *waiter, t time.Time) int {
		if x.arrival.After(t) || retry && x.arrival.Equal(t) {
			return 1 // a retry goes before the callers that arrived with it but have not started
		}
		return -1 // equal arrivals keep their order
	})
	*l = slices.Insert(*l, i, w)
}

// popHead takes the first waiter out of the line (it starts).
func (l *line) popHead() { *l = slices.Delete(*l, 0, 1) }

// remove takes w out of the line and reports whether it was the head.
func (l *line) remove(w *waiter) (head bool) {
	head = (*l)[0] == w
	*l = slices.DeleteFunc(*l, func(x *waiter) bool { return x == w })
	return head
}

// wakeHead tells the first waiter to look again.
func (l line) wakeHead() {
	if len(l) > 0 {
		wake(l[0])
	}
}

// wakeAll tells every waiter to look again.
func (l line) wakeAll() {
	for _, w := range l {
		wake(w)
	}
}

func wake(w *waiter) {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
