package gate

import (
	"testing"
	"time"
)

// TestClosedTrackerSteps drives the closed-origin tracker with outcomes at explicit times: three
// refusals with nothing accepted, one of them this gate's own, spread over two RateWindows close
// it; an acceptance (here or at a peer) resets the count.
func TestClosedTrackerSteps(t *testing.T) {
	const rw = time.Second
	type step struct {
		at    time.Duration // since t0
		op    string        // "own", "peer" (refusals) or "accept"
		close bool          // refuse's answer (false for accept)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"three own refusals over 2s close", []step{{0, "own", false}, {time.Second, "own", false}, {2 * time.Second, "own", true}}},
		{"three in one instant are not enough", []step{{0, "own", false}, {0, "own", false}, {0, "own", false}, {time.Second, "own", false}, {2 * time.Second, "own", true}}},
		{"spread below 2 RateWindows is not enough", []step{{0, "own", false}, {time.Second, "own", false}, {1999 * time.Millisecond, "own", false}, {2 * time.Second, "own", true}}},
		{"peers alone cannot close", []step{{0, "peer", false}, {time.Second, "peer", false}, {2 * time.Second, "peer", false}, {3 * time.Second, "peer", false}}},
		{"one own refusal among peers' closes", []step{{0, "peer", false}, {time.Second, "peer", false}, {2 * time.Second, "own", true}}},
		{"an acceptance restarts the count", []step{{0, "own", false}, {time.Second, "own", false}, {1500 * time.Millisecond, "accept", false}, {2 * time.Second, "own", false}, {3 * time.Second, "own", false}, {4 * time.Second, "own", true}}},
		{"a peer's acceptance forgets the own refusal", []step{{0, "own", false}, {time.Second, "accept", false}, {2 * time.Second, "peer", false}, {3 * time.Second, "peer", false}, {4 * time.Second, "peer", false}}},
	}
	t0 := time.Unix(1000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c closedTracker
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				if s.op == "accept" {
					c.accepted()
					continue
				}
				if got := c.refuse(now, s.op == "own", rw); got != s.close {
					t.Errorf("step %d (%s at %v): refuse = %v, want %v", i, s.op, s.at, got, s.close)
				}
				if s.close {
					c.closed = true // what the owner does
				}
			}
		})
	}
}

// TestClosedTrackerProbeSlot checks where a closed origin's next probe goes: the widest spacing
// after this gate's last refusal, after a later peer refusal (plus the gate's offset) while peers
// live, and never beyond live+1 widest spacings after its own.
func TestClosedTrackerProbeSlot(t *testing.T) {
	const w = 8 * time.Second
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name     string
		own      time.Duration // this gate's last refusal, since t0
		peer     time.Duration // a peer's last refusal, since t0 (-1: none)
		live     int
		id       uint64
		wantFrom time.Duration // the slot, since t0
	}{
		{"alone", 0, -1, 0, 0, w},
		{"a peer's refusal is ignored without live peers", 0, 3 * time.Second, 0, 5, w},
		{"after a later peer refusal", 0, 3 * time.Second, 1, 0, 3*time.Second + w},
		{"plus the gate's offset", 0, 3 * time.Second, 1, 1024 + 512, 3*time.Second + w + 512*(w/4096)},
		{"at most live+1 widest spacings after its own", 0, 20 * time.Second, 1, 0, 2 * w},
		{"an earlier peer refusal changes nothing", 5 * time.Second, 3 * time.Second, 2, 0, 5*time.Second + w},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c closedTracker
			c.refuse(t0.Add(tt.own), true, time.Second)
			if tt.peer >= 0 {
				c.refuse(t0.Add(tt.peer), false, time.Second)
			}
			if got, want := c.probeSlot(tt.live, tt.id, w), t0.Add(tt.wantFrom); !got.Equal(want) {
				t.Errorf("probe slot at %v, want %v", got.Sub(t0), want.Sub(t0))
			}
		})
	}
}

// TestClosedTrackerConfirms checks when a start confirms a peer's closed origin without waiting
// for its pace: queued, not refused itself, the peer's report still live, once per widest spacing.
func TestClosedTrackerConfirms(t *testing.T) {
	const silent, w = 300 * time.Millisecond, 8 * time.Second
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name     string
		c        closedTracker
		queued   bool
		at       time.Duration
		confirms bool
	}{
		{"no peer reports a closed origin", closedTracker{}, true, 0, false},
		{"a live report", closedTracker{peerClosedAt: t0}, true, 100 * time.Millisecond, true},
		{"nobody queued", closedTracker{peerClosedAt: t0}, false, 100 * time.Millisecond, false},
		{"the report is stale", closedTracker{peerClosedAt: t0}, true, silent, false},
		{"refused itself", closedTracker{peerClosedAt: t0, ownRefused: true}, true, 0, false},
		{"closed itself", closedTracker{peerClosedAt: t0, closed: true}, true, 0, false},
		{"confirmed within the widest spacing", closedTracker{peerClosedAt: t0, confirmedAt: t0.Add(-w + time.Millisecond)}, true, 0, false},
		{"confirmed a widest spacing ago", closedTracker{peerClosedAt: t0, confirmedAt: t0.Add(-w)}, true, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.confirms(t0.Add(tt.at), tt.queued, silent, w); got != tt.confirms {
				t.Errorf("confirms = %v, want %v", got, tt.confirms)
			}
		})
	}
}

// TestClosedTrackerProbe checks the prober's life: granted, it holds the probe until reported
// or its lease ends; a prober that leaves before its grant frees the probe.
func TestClosedTrackerProbe(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var c closedTracker
	c.probing = true
	c.left()
	if c.probing {
		t.Errorf("probing after the waiting prober left, want not")
	}
	c.probing = true
	c.probeGranted(7, t0)
	c.left()
	if !c.probing {
		t.Errorf("a granted probe ended when its waiter left, want it held until reported")
	}
	c.released(6)
	if !c.probing {
		t.Errorf("another permit's report ended the probe")
	}
	c.expire(t0.Add(time.Minute-1), time.Minute)
	if !c.probing {
		t.Errorf("the probe ended before its lease")
	}
	c.expire(t0.Add(time.Minute), time.Minute)
	if c.probing || c.probeID != 0 {
		t.Errorf("probing %v id %d after the lease, want neither", c.probing, c.probeID)
	}
	c.probing = true
	c.probeGranted(8, t0)
	c.released(8)
	if c.probing {
		t.Errorf("probing after the probe was reported")
	}
}
