package gate

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The rules by which the gates of a fleet keep one pace, one by one, with peers played by hand.

// keepAlive makes peers signal g every interval (each changed by mod, if any) until the returned
// stop is called, so that they stay live while a test waits.
func keepAlive(g *Gate, mod func(*Signal), peers ...*fakePeer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, p := range peers {
				g.Observe(p.next(mod))
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// proposal is the spacing g proposes to its peers.
func proposal(t *testing.T, g *Gate) time.Duration {
	t.Helper()
	s, ok := g.NextSignal()
	if !ok {
		t.Fatal("NextSignal: not ok")
	}
	return s.Spacing
}

func TestFleetSpacingIsTheMedian(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		peers := []*fakePeer{newFakePeer(1), newFakePeer(2), newFakePeer(3), newFakePeer(4)}
		for _, p := range peers {
			trust(t, g, p)
		}
		reject(t, g, 1) // epoch 1; nothing accepted: it proposes 1s
		if got := proposal(t, g); got != time.Second {
			t.Fatalf("proposal after a refusal with nothing accepted: %v, want 1s", got)
		}
		tests := []struct {
			name   string
			epochs [4]uint64
			spaces [4]time.Duration
			want   time.Duration
		}{
			// 1s here; 200ms, 300ms, and one far off (clamped to Max): the middle two of four.
			{"three peers in the epoch", [4]uint64{1, 1, 1, 0}, [4]time.Duration{200 * time.Millisecond, 300 * time.Millisecond, time.Hour, time.Millisecond}, 650 * time.Millisecond},
			// A peer in an earlier epoch has not heard of the reaction: its value does not count.
			{"one of them behind", [4]uint64{1, 0, 1, 0}, [4]time.Duration{200 * time.Millisecond, 300 * time.Millisecond, time.Hour, time.Millisecond}, time.Second},
			{"all four", [4]uint64{1, 1, 1, 1}, [4]time.Duration{200 * time.Millisecond, 300 * time.Millisecond, time.Hour, time.Millisecond}, 300 * time.Millisecond},
		}
		for _, tt := range tests {
			for i, p := range peers {
				g.Observe(p.next(func(s *Signal) { s.Epoch, s.Spacing = tt.epochs[i], tt.spaces[i] }))
			}
			if got := g.Snapshot().Spacing; got != tt.want {
				t.Errorf("%s: spacing %v, want %v", tt.name, got, tt.want)
			}
			if got := proposal(t, g); got != time.Second {
				t.Errorf("%s: proposal %v, want 1s (the median is what it uses, not what it proposes)", tt.name, got)
			}
		}
		// Silent peers fall out of it.
		time.Sleep(peerLive * interval)
		if got := g.Snapshot().Spacing; got != time.Second {
			t.Errorf("peers silent: spacing %v, want 1s (its own)", got)
		}
	})
}

func TestFleetRelaxesOnPeersSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		p := newFakePeer(7)
		trust(t, g, p)
		reject(t, g, 1) // 1s
		at := func(s *Signal) { s.Epoch, s.Spacing, s.Demand = 1, time.Second, 3 }
		g.Observe(p.next(at))
		// RelaxRun acceptances at the peer, which has callers queued: the fleet relaxes a step.
		g.Observe(p.next(func(s *Signal) { at(s); s.Accepted += DefaultRelaxRun }))
		want := time.Second * 15 / 16
		if got := proposal(t, g); got != want {
			t.Fatalf("after %d acceptances at a busy peer: proposal %v, want %v", DefaultRelaxRun, got, want)
		}
		// As many again at once: the next step waits RelaxRun half-spacings, whatever a peer claims.
		g.Observe(p.next(func(s *Signal) { at(s); s.Accepted += DefaultRelaxRun }))
		if got := proposal(t, g); got != want {
			t.Errorf("another %d at once: proposal %v, want %v still", DefaultRelaxRun, got, want)
		}
		stop := keepAlive(g, at, p)
		time.Sleep(time.Duration(DefaultRelaxRun) * time.Second / 2)
		stop()
		g.Observe(p.next(func(s *Signal) { at(s); s.Accepted++ }))
		// The step starts from the fleet's spacing, the median of 15/16s here and 1s there.
		if got, want := proposal(t, g), (want+time.Second)/2*14/16; got != want {
			t.Errorf("%v later: proposal %v, want %v (the second step cuts 2/16 of the fleet's)", time.Duration(DefaultRelaxRun)*time.Second/2, got, want)
		}
		// An idle fleet does not relax.
		idle := func(s *Signal) { s.Epoch, s.Spacing, s.Demand = 1, time.Second, 0 }
		before := proposal(t, g)
		stop = keepAlive(g, idle, p)
		time.Sleep(time.Duration(DefaultRelaxRun) * time.Second)
		stop()
		g.Observe(p.next(func(s *Signal) { idle(s); s.Accepted += DefaultRelaxRun }))
		if got := proposal(t, g); got != before {
			t.Errorf("acceptances with nobody queued: proposal %v, want %v", got, before)
		}
	})
}

func TestNextSignalDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		g.NextSignal()
		if got := g.NextSignalDelay(); got != interval/4 {
			t.Errorf("joining: delay %v, want %v", got, interval/4)
		}
		time.Sleep(joinIntervals * interval)
		if got := g.NextSignalDelay(); got != interval {
			t.Errorf("joined: delay %v, want %v", got, interval)
		}
		p := newFakePeer(7)
		for range 3 { // heard, admitted, a run of 2: a newcomer
			g.Observe(p.next(nil))
			time.Sleep(interval / 4)
		}
		if got := g.NextSignalDelay(); got != interval/4 {
			t.Errorf("a newcomer talking: delay %v, want %v", got, interval/4)
		}
		g.Observe(p.next(nil))
		if !isTrusted(g, p.s.Gate) {
			t.Fatal("the newcomer is not trusted after 4 signals a quarter interval apart")
		}
		if got := g.NextSignalDelay(); got != interval {
			t.Errorf("the newcomer trusted: delay %v, want %v", got, interval)
		}
		if got := New(Config{Mode: Fixed}).NextSignalDelay(); got != interval {
			t.Errorf("fixed mode: delay %v, want %v", got, interval)
		}
	})
}

func TestFleetBurstListens(t *testing.T) {
	tests := []struct {
		name   string
		peers  int
		demand int
		want   time.Duration
	}{
		{"no peers: at once", 0, 0, 0},
		// Three peers with lower ids, last heard idle: for 10ms they may be busy with the same
		// burst, and with a window of 2 this gate (rank 3) waits; then it knows they are idle.
		{"idle peers: after listening", 3, 0, interval / 10},
		// Busy peers with lower ids take the window's two slots, and stay busy: left out, it
		// gets a start after peerLive intervals (the silence after which a peer stops counting)
		// for each window's worth of gates before it, by rank: rank 3 of a window of 2, 3/2 of
		// them (the rank-2 gate's start comes after one).
		{"busy peers: left out", 3, 2, peerLive * interval * 3 / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Config{})
				var peers []*fakePeer
				for i := range tt.peers {
					p := newFakePeer(uint64(i + 1))
					peers = append(peers, p)
					trust(t, g, p)
				}
				time.Sleep(interval / 2)
				for _, p := range peers {
					g.Observe(p.next(func(s *Signal) { s.Demand = tt.demand }))
				}
				time.Sleep(time.Millisecond)        // the burst comes after their news
				stop := keepAlive(g, nil, peers...) // live (and as busy) all along
				defer stop()
				t0 := time.Now()
				if _, at := take(t, g, t0); at != tt.want {
					t.Errorf("the first start of a burst at %v, want %v", at, tt.want)
				}
			})
		})
	}
}

// A gate's first upgrade of a burst, accepted while the fleet is unpaced, holds its next start
// for as long as the peers' news of the same round takes to come (listen: a tenth of an interval
// and the echo). Their refusals are on their way; without the hold, gates 25ms away whose first
// upgrades were accepted started again into the bucket the round had just emptied, before they
// heard of them (about 2 refusals a 60-burst in the bench).
func TestFleetFirstRoundListens(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		peers bool
		echo  time.Duration
		want  time.Duration // from the first one's success to the second start
	}{
		{"no peers: at once", false, 0, 0},
		{"peers on one machine: a tenth of an interval", true, 0, interval / 10},
		{"peers 25ms away: and the echo", true, 50 * ms, interval/10 + 50*ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Config{InitialWindow: 1}) // the second start waits for the first's outcome
				a := g.ctl.(*adaptive)
				a.fleet().id = 1 // first in rank: its first start needs no one's news
				if tt.peers {
					peers := []*fakePeer{newFakePeer(10), newFakePeer(20)}
					for _, p := range peers {
						trust(t, g, p)
					}
					defer keepAlive(g, nil, peers...)()
				}
				a.mu.Lock()
				a.fleet().echo.latency = tt.echo
				a.mu.Unlock()
				first, _ := take(t, g, time.Now())
				second := make(chan time.Time)
				go func() {
					pm, err := g.Wait(t.Context())
					if err != nil {
						t.Errorf("Wait: %v", err)
					}
					second <- time.Now()
					pm.Succeeded()
				}()
				time.Sleep(5 * ms) // the first handshake
				ok := time.Now()
				first.Succeeded()
				if at := (<-second).Sub(ok); at != tt.want {
					t.Errorf("second start %v after the first success, want %v", at, tt.want)
				}
				// Later in the burst, it starts at once: the hold is the first round's.
				third, _ := take(t, g, time.Now())
				if at := time.Since(ok); at > tt.want {
					t.Errorf("third start %v after the first success, want by %v", at, tt.want)
				}
				third.Succeeded()
			})
		})
	}
}

func TestFleetFirstReactionSlots(t *testing.T) {
	tests := []struct {
		name string
		ids  [2]uint64
		want time.Duration
	}{
		// 1s spacing (nothing accepted), this gate with 1 caller and 2 of demand 2 each: own spacing 5s.
		{"rank 0", [2]uint64{1<<64 - 2, 1<<64 - 3}, time.Second},
		{"rank 2", [2]uint64{1, 2}, 3 * time.Second}, // the slot 3 spacings after the reaction
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Config{})
				peers := []*fakePeer{newFakePeer(tt.ids[0]), newFakePeer(tt.ids[1])}
				for _, p := range peers {
					trust(t, g, p)
				}
				busy := func(s *Signal) { s.Demand = 2 }
				for _, p := range peers {
					g.Observe(p.next(busy))
				}
				stop := keepAlive(g, busy, peers...)
				defer stop()
				pm, _ := take(t, g, time.Now()) // rank 2 waits its turn (an interval) in slow start
				pm.Forbidden(0)                 // the fleet's first reaction
				t0 := time.Now()
				// One caller here, 2 at each peer: a share of 1/5.
				if s := g.Snapshot(); s.Spacing != time.Second || s.OwnSpacing != 5*time.Second {
					t.Fatalf("spacing %v, own %v; want 1s, 5s", s.Spacing, s.OwnSpacing)
				}
				pm, at := take(t, g, t0)
				if at != tt.want {
					t.Errorf("the next start at %v, want %v (its slot, not its own pace of 5s)", at, tt.want)
				}
				pm.Succeeded()
			})
		})
	}
}

func TestFleetConfirmsAPeersClosedOrigin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		p := newFakePeer(7)
		trust(t, g, p)
		busy := func(s *Signal) { s.Demand = 100 }
		t0 := time.Now()
		reject(t, g, 1)                                              // paced at 1s...
		g.Observe(p.next(func(s *Signal) { busy(s); s.Accepted++ })) // ...but not refused since an acceptance
		if s := g.Snapshot(); s.OwnSpacing != 4*time.Second || s.Closed {
			t.Fatalf("own spacing %v, closed %v; want 4s (a share of 1/101, raised to half an equal share), open", s.OwnSpacing, s.Closed)
		}
		g.Observe(p.next(func(s *Signal) { busy(s); s.Rejected++; s.Closed = true })) // the peer sees a closed origin
		closed := func(s *Signal) { busy(s); s.Closed = true }
		stop := keepAlive(g, closed, p)
		pm, at := take(t, g, t0)
		stop()
		if at != time.Second {
			t.Errorf("start after a peer's closed origin at %v, want 1s (the refusal's hold, not its own pace)", at)
		}
		pm.Succeeded() // it was not closed after all
		g.Observe(p.next(func(s *Signal) { closed(s); s.Rejected++ }))
		stop = keepAlive(g, closed, p)
		defer stop()
		if _, at := take(t, g, t0); at < time.Second+4*time.Second {
			t.Errorf("a second confirmation at %v, want its own pace again (4s after; confirming at once only once per Max)", at)
		}
	})
}

// A peer's start, heard of, holds a gate a fleet spacing after it, and its turn after that peer's
// a step per busy gate between them. The start was the echo's low ago (the news's way through the
// transport: 50ms from hosts 25ms from NATS), and a step is the echo's latency more than a 32nd
// of an interval: the gate before this one in turn, starting at its turn, is heard of before this
// one's comes (with steps of a 32nd alone, gates 25ms away started three at once).
func TestFleetTurnsAfterAStart(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		starter uint64        // the peer whose start is heard
		turn    int           // busy gates between it and this one (id 30), in id order
		echo    time.Duration // this gate's echo, latency and low alike
	}{
		{"next in turn", 20, 0, 0},
		{"one gate between", 10, 1, 0},
		{"around the ring", 40, 2, 0},
		{"next in turn, hosts 25ms away", 20, 0, 50 * ms},
		{"one gate between, hosts 25ms away", 10, 1, 50 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Config{})
				g.ctl.(*adaptive).fleet().id = 30
				peers := map[uint64]*fakePeer{10: newFakePeer(10), 20: newFakePeer(20), 40: newFakePeer(40)}
				for _, p := range peers {
					trust(t, g, p)
				}
				busy := func(s *Signal) { s.Demand, s.Started = 1, false }
				alive := func() { // the peers stay live and busy (signalled from this goroutine only)
					for _, p := range peers {
						g.Observe(p.next(busy))
					}
				}
				reject(t, g, 1) // paced: 1s for the fleet, 4s for this gate (a share of 1/4)
				for range 50 {
					time.Sleep(interval)
					alive()
				}
				// Its own pace would let it start now; a peer's start, announced, holds it a
				// spacing, and its turn after that peer's.
				a := g.ctl.(*adaptive)
				a.mu.Lock()
				a.f.echo.latency, a.f.echo.low = tt.echo, tt.echo
				a.mu.Unlock()
				g.Observe(peers[tt.starter].next(func(s *Signal) { busy(s); s.Started = true }))
				heard := time.Now()
				started := make(chan Permit)
				go func() {
					pm, err := g.Wait(t.Context())
					if err != nil {
						t.Errorf("Wait: %v", err)
					}
					started <- pm
				}()
				var pm Permit
				for wait := true; wait; {
					select {
					case pm = <-started:
						wait = false
					case <-time.After(interval):
						alive()
					}
				}
				step := interval/staggerSteps + tt.echo
				if at, want := time.Since(heard), time.Second-tt.echo+time.Duration(tt.turn)*step; at != want {
					t.Errorf("start %v after the news, want %v (a spacing after the start, %v before the news, then %d turns of %v)", at, want, tt.echo, tt.turn, step)
				}
				// Its own start, paced, is news for the next signal, and only for it.
				if s, _ := g.NextSignal(); !s.Started {
					t.Error("the signal after a paced start does not announce it")
				}
				if s, _ := g.NextSignal(); s.Started {
					t.Error("the signal after that announces it again")
				}
				pm.Succeeded()
			})
		})
	}
}

// A share that grows shortens only what is left of a gate's wait, in proportion: the gates of a
// fleet hear of it together, and counted from each one's last start the new spacing would let
// every gate whose last start is a new spacing ago start at once.
func TestFleetShareGrowthKeepsThePhase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		peers := []*fakePeer{newFakePeer(1), newFakePeer(2), newFakePeer(3)}
		for _, p := range peers {
			trust(t, g, p)
		}
		demand := 1
		alive := func() { // the peers stay live (signalled from this goroutine only)
			for _, p := range peers {
				g.Observe(p.next(func(s *Signal) { s.Demand, s.Started = demand, false }))
			}
		}
		reject(t, g, 1) // paced: 1s for the fleet
		for range 50 {
			time.Sleep(interval)
			alive()
		}
		pm, err := g.Wait(t.Context())
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		first := time.Now()
		pm.Succeeded()
		started := make(chan time.Time)
		go func() { // queued from now on: a share of 1/4, 4s apart
			pm, err := g.Wait(t.Context())
			if err != nil {
				t.Errorf("Wait: %v", err)
			}
			started <- time.Now()
			pm.Succeeded()
		}()
		var at time.Time
		for wait := true; wait; {
			select {
			case at = <-started:
				wait = false
			case <-time.After(interval):
				if time.Since(first) >= 3*time.Second {
					demand = 0 // the peers are done: the whole spacing is this gate's, 1s
				}
				alive()
			}
		}
		// 3s of the 4s waited, the last second shrinks to a quarter of it.
		if got, want := at.Sub(first), 3*time.Second+250*time.Millisecond; got != want {
			t.Errorf("second start %v after the first, want %v (3s at a share of 1/4, the last 1s at 1/1)", got, want)
		}
	})
}
