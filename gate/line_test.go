package gate

import (
	"testing"
	"time"
)

// TestLineOrder inserts callers and retries and checks the order they start in: by arrival,
// equal arrivals in turn, and a retry before the callers that arrived with it.
func TestLineOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type in struct {
		name    string
		arrival time.Duration // since t0
		retry   bool
	}
	tests := []struct {
		name string
		ins  []in
		want []string
	}{
		{"by arrival", []in{{"b", 2, false}, {"a", 1, false}, {"c", 3, false}}, []string{"a", "b", "c"}},
		{"equal arrivals in turn", []in{{"a", 1, false}, {"b", 1, false}, {"c", 1, false}}, []string{"a", "b", "c"}},
		{"a retry before its equals", []in{{"a", 1, false}, {"b", 1, false}, {"r", 1, true}}, []string{"r", "a", "b"}},
		{"a retry after the earlier ones", []in{{"a", 0, false}, {"b", 2, false}, {"r", 1, true}}, []string{"a", "r", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l line
			names := map[*waiter]string{}
			for _, x := range tt.ins {
				w := &waiter{arrival: t0.Add(x.arrival), wake: make(chan struct{}, 1)}
				names[w] = x.name
				l.insert(w, x.retry)
			}
			var got []string
			for _, w := range l {
				got = append(got, names[w])
			}
			if len(got) != len(tt.want) {
				t.Fatalf("order %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("order %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// TestLineRemoveWakes checks that removing the head is reported (so the next one is woken) and
// that wake-ups coalesce.
func TestLineRemoveWakes(t *testing.T) {
	var l line
	ws := make([]*waiter, 3)
	for i := range ws {
		ws[i] = &waiter{arrival: time.Unix(int64(i), 0), wake: make(chan struct{}, 1)}
		l.insert(ws[i], false)
	}
	if l.remove(ws[1]) {
		t.Errorf("removing the middle waiter reported the head")
	}
	if !l.remove(ws[0]) {
		t.Errorf("removing the head did not report it")
	}
	l.wakeHead()
	l.wakeHead() // coalesces: the channel holds one
	if len(ws[2].wake) != 1 {
		t.Errorf("the new head has %d wake-ups pending, want 1", len(ws[2].wake))
	}
	l.popHead()
	if len(l) != 0 {
		t.Errorf("%d waiters left, want 0", len(l))
	}
	l.wakeHead() // an empty line: nothing to wake, no panic
}
