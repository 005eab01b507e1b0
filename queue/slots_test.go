package queue

import (
	"testing"
)

// TestSlots runs the slot pool through step tables: requests take free slots or the pull loop's
// waiting one, never more than the cap; the loop learns when its slot was stolen.
func TestSlots(t *testing.T) {
	type step struct {
		op   string // acquire, try, release, reserve, begin, end, waiting
		want bool
	}
	tests := []struct {
		name  string
		n     int
		steps []step
	}{
		{"requests fill the cap, then are refused", 2, []step{
			{"acquire", true}, {"acquire", true}, {"acquire", false}, {"try", false},
			{"release", true}, {"acquire", true},
		}},
		{"a request steals the slot the loop waits in", 1, []step{
			{"reserve", true}, {"waiting", true}, {"acquire", true}, {"waiting", false},
			{"end", true}, // stolen: the loop no longer holds it
			{"acquire", false},
		}},
		{"stolen before the wait began: the loop does not wait", 1, []step{
			{"reserve", true}, {"acquire", true}, {"begin", true}, {"waiting", false},
			{"acquire", false},
		}},
		{"a wait that ends unstolen keeps the slot", 1, []step{
			{"reserve", true}, {"begin", false}, {"end", false}, {"waiting", false},
			{"acquire", false}, // the loop's slot is no longer stealable
			{"release", true}, {"acquire", true},
		}},
		{"a free slot is taken before the loop's", 2, []step{
			{"reserve", true}, {"acquire", true}, {"waiting", true}, {"acquire", true},
			{"waiting", false}, {"acquire", false},
		}},
		{"only one steal per wait", 2, []step{
			{"reserve", true}, {"acquire", true}, {"acquire", true}, {"acquire", false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newSlots(tt.n)
			stop := make(chan struct{})
			for i, s := range tt.steps {
				var got bool
				switch s.op {
				case "acquire":
					got = p.acquire()
				case "try":
					got = p.tryAcquire()
				case "release":
					p.release()
					got = true
				case "reserve":
					got = p.reserve(stop)
				case "begin":
					got = p.beginWait(func() {})
				case "end":
					got = p.endWait()
				case "waiting":
					got = p.waiting()
				default:
					t.Fatalf("step %d: unknown op %q", i, s.op)
				}
				if got != s.want {
					t.Fatalf("step %d (%s): got %v, want %v", i, s.op, got, s.want)
				}
			}
		})
	}
}

// TestSlotsStealCancelsTheWait: a steal during the wait calls the wait's cancel func.
func TestSlotsStealCancelsTheWait(t *testing.T) {
	p := newSlots(1)
	if !p.reserve(nil) {
		t.Fatal("reserve on a free pool: got false, want true")
	}
	cancelled := false
	if p.beginWait(func() { cancelled = true }) {
		t.Fatal("beginWait: got stolen, want not")
	}
	if !p.acquire() {
		t.Fatal("acquire during the wait: got false, want the loop's slot")
	}
	if !cancelled {
		t.Error("the wait was not cancelled")
	}
	if !p.endWait() {
		t.Error("endWait: got not stolen, want stolen")
	}
}

// TestSlotsReserveStops: a reserve on a full pool returns false when stop closes, and true once
// a slot is freed.
func TestSlotsReserveStops(t *testing.T) {
	p := newSlots(1)
	p.acquire()
	stop := make(chan struct{})
	close(stop)
	if p.reserve(stop) {
		t.Fatal("reserve on a full pool with stop closed: got true, want false")
	}
	if p.acquireWait(stop) {
		t.Fatal("acquireWait on a full pool with stop closed: got true, want false")
	}
	p.release()
	if !p.reserve(make(chan struct{})) {
		t.Fatal("reserve after a release: got false, want true")
	}
}
