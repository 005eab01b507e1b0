package gate

import (
	"context"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// The shared-state rules, one by one. Peers are played by hand: a fakePeer makes a gate's
// signals, and the tests apply them with observeAt at chosen (virtual) times.

const interval = DefaultReportInterval

type fakePeer struct{ s Signal }

func newFakePeer(id uint64) *fakePeer { return &fakePeer{s: Signal{Gate: id}} }

// next returns the peer's next signal, changed by mod.
func (p *fakePeer) next(mod func(*Signal)) Signal {
	p.s.Seq++
	if mod != nil {
		mod(&p.s)
	}
	return p.s
}

// trust makes g count p as a peer, sending its signals an interval apart in virtual time.
func trust(t *testing.T, g *Gate, p *fakePeer) {
	t.Helper()
	for range 10 {
		g.Observe(p.next(nil))
		if isTrusted(g, p.s.Gate) {
			return
		}
		time.Sleep(interval)
	}
	t.Fatalf("peer %x not trusted after 10 intervals", p.s.Gate)
}

func isTrusted(g *Gate, id uint64) bool {
	a := g.ctl.(*adaptive)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.f.peers {
		if p.id == id {
			return p.trusted
		}
	}
	return false
}

func TestPeerTrust(t *testing.T) {
	tests := []struct {
		name  string
		gaps  []time.Duration // between consecutive signals
		peers int
	}{
		// The first signal only enters the admission filter; then 3 increasing seqs over a quarter
		// interval at least.
		{"four, an interval apart", []time.Duration{interval, interval, interval}, 1},
		{"four, a quarter interval apart (a gate joining)", []time.Duration{interval / 4, interval / 4, interval / 4}, 1},
		{"three are not enough", []time.Duration{interval, interval}, 0},
		{"four within one interval are not enough", []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}, 0},
		{"a silence restarts the run", []time.Duration{interval, 4 * interval, interval}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New(Config{})
			p := newFakePeer(7)
			now := time.Now()
			g.observeAt(p.next(nil), now) // observeAt: the rule in explicit time
			for _, d := range tt.gaps {
				now = now.Add(d)
				g.observeAt(p.next(nil), now)
			}
			if s := g.Snapshot(); s.Peers != tt.peers || s.SignalsUnknown != int64(len(tt.gaps)+1-tt.peers) {
				t.Errorf("peers %d, unknown %d; want %d, %d", s.Peers, s.SignalsUnknown, tt.peers, len(tt.gaps)+1-tt.peers)
			}
		})
	}
}

func TestPeerDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		p := newFakePeer(7)
		trust(t, g, p)
		base := g.Snapshot()
		old := p.s
		g.Observe(p.next(nil))
		g.Observe(old) // replayed: stale
		g.Observe(p.next(func(s *Signal) { s.Accepted++ }))
		g.Observe(p.next(func(s *Signal) { s.Accepted-- }))       // a total going back: invalid
		g.Observe(Signal{Gate: 7, Seq: 1 << 62})                  // out of range: invalid
		g.Observe(Signal{Gate: g.ctl.(*adaptive).f.id, Seq: 1e6}) // our own: ignored
		s := g.Snapshot()
		if got := s.SignalsApplied - base.SignalsApplied; got != 2 {
			t.Errorf("applied %d, want 2", got)
		}
		if got := s.SignalsStale - base.SignalsStale; got != 1 {
			t.Errorf("stale %d, want 1", got)
		}
		if got := s.SignalsInvalid - base.SignalsInvalid; got != 2 {
			t.Errorf("invalid %d, want 2", got)
		}
		if err := g.ObserveBinary([]byte("garbage")); err == nil {
			t.Error("ObserveBinary accepted garbage")
		}
		if got := g.Snapshot().SignalsInvalid - s.SignalsInvalid; got != 1 {
			t.Errorf("garbage counted %d times as invalid, want 1", got)
		}
	})
}

func TestPeerRateCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		p := newFakePeer(7)
		trust(t, g, p)
		time.Sleep(interval)
		base := g.Snapshot()
		for range 2 * peerBurst {
			g.Observe(p.next(nil))
		}
		s := g.Snapshot()
		if applied, flooded := s.SignalsApplied-base.SignalsApplied, s.SignalsFlooded-base.SignalsFlooded; applied != peerBurst || flooded != peerBurst {
			t.Errorf("%d signals in one interval: %d applied, %d flooded; want %d, %d", 2*peerBurst, applied, flooded, peerBurst, peerBurst)
		}
		time.Sleep(interval)
		g.Observe(p.next(nil))
		if got := g.Snapshot().SignalsApplied - s.SignalsApplied; got != 1 {
			t.Errorf("the next interval: %d applied, want 1", got)
		}
	})
}

func TestPeerTableCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		var peers []*fakePeer
		for i := range 2 * maxPeers {
			peers = append(peers, newFakePeer(uint64(i+1)))
		}
		// The first 32 become peers; then 32 more keep talking.
		for range 5 {
			for _, p := range peers[:maxPeers] {
				g.Observe(p.next(nil))
			}
			time.Sleep(interval)
		}
		for range 5 {
			for _, p := range peers {
				g.Observe(p.next(nil))
			}
			time.Sleep(interval)
		}
		if s := g.Snapshot(); s.Peers != maxPeers || s.SignalsFlooded == 0 {
			t.Errorf("peers %d, flooded %d; want %d, > 0 (a table of live peers turns the rest away)", s.Peers, s.SignalsFlooded, maxPeers)
		}
		for _, p := range peers[maxPeers:] {
			if isTrusted(g, p.s.Gate) {
				t.Fatalf("peer %d got in", p.s.Gate)
			}
		}
		// The first 32 fall silent: the others take their places.
		for range 8 {
			for _, p := range peers[maxPeers:] {
				g.Observe(p.next(nil))
			}
			time.Sleep(interval)
		}
		if !isTrusted(g, peers[len(peers)-1].s.Gate) {
			t.Error("a newcomer did not get a silent peer's place")
		}
	})
}

func TestRandomIDFloodNeverCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		rnd := rand.New(rand.NewPCG(1, 2))
		for range 100 { // 10 s of 10,000 signals a second
			for range 1000 {
				g.Observe(Signal{Gate: rnd.Uint64() | 1, Seq: 1 + rnd.Uint64N(1<<40), Epoch: maxSignalEpoch - 1, Demand: maxSignalDemand,
					Recent: maxSignalRecent, Accepted: 1 << 40, Rejected: 1 << 40, RetryAfter: time.Hour, Spacing: time.Hour, Closed: true})
			}
			time.Sleep(interval)
		}
		s := g.Snapshot()
		if s.Peers != 0 || s.SignalsApplied != 0 || s.Epoch != 0 || s.Window != DefaultInitialWindow {
			t.Errorf("after a random-id flood: %+v; want no peers, nothing applied, the gate as new", s)
		}
		t0 := time.Now()
		succeed(t, g, 3)
		if at := time.Since(t0); at != 0 {
			t.Errorf("starts after the flood waited %v, want 0", at)
		}
	})
}

func TestPeerExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		p := newFakePeer(7)
		trust(t, g, p)
		g.Observe(p.next(func(s *Signal) { s.Demand = 3 }))
		reject(t, g, 1) // spacing 1s; own share 1/(1+3)
		if s := g.Snapshot(); s.Peers != 1 || s.OwnSpacing != 4*s.Spacing {
			t.Fatalf("peers %d, own spacing %v, spacing %v; want 1, 4x", s.Peers, s.OwnSpacing, s.Spacing)
		}
		time.Sleep(peerLive * interval)
		if s := g.Snapshot(); s.Peers != 0 || s.OwnSpacing != s.Spacing {
			t.Errorf("after %v of silence: peers %d, own spacing %v, spacing %v; want 0, the same", peerLive*interval, s.Peers, s.OwnSpacing, s.Spacing)
		}
	})
}

func TestEpochs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		p := newFakePeer(7)
		trust(t, g, p)
		succeed(t, g, 6)                                      // window 2 -> 5 (slow start, one at a time grows while half full)
		g.Observe(p.next(func(s *Signal) { s.Accepted = 4 })) // the peer's 4, which its Recent then counts
		w := g.Snapshot().Window
		// A peer widened: apply its reaction once.
		g.Observe(p.next(func(s *Signal) { s.Epoch = 5; s.Recent = 4; s.Spacing = 100 * time.Millisecond }))
		s := g.Snapshot()
		// 6 accepted here + 4 at the peer in the last second: 100ms.
		if s.Epoch != 5 || s.Window != w/2 || s.Spacing != 100*time.Millisecond {
			t.Errorf("after a peer's epoch 5: %+v; want epoch 5, window %d, spacing 100ms", s, w/2)
		}
		g.Observe(p.next(nil)) // the same epoch again: nothing
		time.Sleep(2 * interval)
		g.Observe(p.next(nil))
		if s2 := g.Snapshot(); s2.Window != s.Window || s2.Spacing != s.Spacing {
			t.Errorf("the same epoch again changed window %d -> %d, spacing %v -> %v", s.Window, s2.Window, s.Spacing, s2.Spacing)
		}
		// An attempt that started before the adopted reaction is refused: not news.
		g2 := New(Config{})
		q := newFakePeer(8)
		trust(t, g2, q)
		old, err := g2.Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		g2.Observe(q.next(func(s *Signal) { s.Epoch = 1 }))
		before := g2.Snapshot()
		old.Forbidden(0)
		if after := g2.Snapshot(); after.Epoch != 1 || after.Spacing != before.Spacing || after.Window != before.Window {
			t.Errorf("a stale refusal after adopting epoch 1: %+v, before %+v; want no widening", after, before)
		}
		// A fresh one widens and bumps the epoch, and Pending says so.
		select {
		case <-g2.Pending():
		default:
		}
		p2, _ := g2.Wait(t.Context())
		p2.Forbidden(0)
		if after := g2.Snapshot(); after.Epoch != 2 || after.Spacing <= before.Spacing {
			t.Errorf("a fresh refusal: %+v; want epoch 2, a wider spacing than %v", after, before.Spacing)
		}
		select {
		case <-g2.Pending():
		default:
			t.Error("Pending did not fire on a refusal")
		}
		if sig, ok := g2.NextSignal(); !ok || sig.Epoch != 2 || sig.Rejected != 2 {
			t.Errorf("NextSignal = %+v, %v; want epoch 2, 2 rejected", sig, ok)
		}
	})
}

// A liar's refusal that lands before the fleet's first acceptances makes a gate adopt a reaction
// that measured nothing: a spacing of a RateWindow. A refusal that then confirms it (a peer's,
// with the burst's acceptances; or one here of a start made before it) makes it again with what
// the fleet accepted since, as that refusal would have without the liar's: doubting the liar
// later undoes nothing, and before this rule the gate kept a RateWindow's pace (what CI saw of
// TestGateLiarOverNATS/stall: 1.8 upgrades/s of the origin's 10 for all 8 s).
func TestConfirmedReactionMeasuresAgain(t *testing.T) {
	for _, tt := range []struct {
		name string
		own  bool // the refusal that confirms is this gate's, else the honest peer's
	}{
		{name: "by the peer's refusal"},
		{name: "by a refusal here", own: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g, h, l := honestAndLiar(t)
				early, err := g.Wait(t.Context()) // a start of the burst, before the liar's refusal
				if err != nil {
					t.Fatal(err)
				}
				g.Observe(l.next(func(s *Signal) { s.Epoch++; s.Rejected++; s.Spacing = time.Hour }))
				if got := ownProposal(g); got < DefaultRateWindow {
					t.Fatalf("the liar's reaction, adopted before any acceptance: proposal %v; want a RateWindow (it measured none)", got)
				}
				time.Sleep(settleIntervals * interval) // beyond the late news that refines a reaction
				// The honest peer: 10 of the burst accepted, then (unless the refusal is this
				// gate's) one refused, of a start made before the liar's reaction reached it.
				g.Observe(h.next(func(s *Signal) {
					s.Accepted += 10
					s.Recent = 10
					s.Epoch = 1
					if !tt.own {
						s.Rejected++
					}
				}))
				if tt.own {
					early.Forbidden(0)
				} else {
					early.Succeeded()
				}
				// 10 accepted in the last second, from an unpaced fleet: 100ms, not a RateWindow.
				if got := ownProposal(g); got != 100*time.Millisecond {
					t.Errorf("after a refusal that confirms the liar's reaction, with 10 accepted in the last second: proposal %v; want 100ms", got)
				}
			})
		})
	}
}

// A liar's proposal stands in the median that a gate's reactions back off from, and a median
// of two is their mean: adopting an honest peer's reaction (in the moments the peer's epoch
// leads the liar's), a gate backed off from half the widest spacing. Doubting the liar undid
// nothing (the reaction was the honest peer's), and the gate held both to seconds-long paces
// (what was left of TestGateLiarOverNATS/stall's flake: 1 of 72 runs). Found out, the liar's
// part goes: the own proposal comes down to at most Backoff times the highest of the other
// live peers'.
func TestDoubtUndoesTheMediansRaise(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, h, l := honestAndLiar(t)
		g.Observe(l.next(func(s *Signal) { s.Epoch++; s.Rejected++; s.Spacing = time.Hour }))
		time.Sleep(settleIntervals * interval)
		// The honest peer, which found the liar out already: 10 accepted, a refusal and its own
		// reaction to it, 100ms.
		g.Observe(h.next(func(s *Signal) {
			s.Accepted += 10
			s.Recent = 10
			s.Rejected++
			s.Epoch = 2
			s.Spacing = 100 * time.Millisecond
		}))
		if got := ownProposal(g); got < time.Second {
			t.Fatalf("after adopting the peer's reaction with the liar's proposal in the median: proposal %v; want the raise this test is about (seconds)", got)
		}
		// The liar overdraws its credit: found out.
		g.Observe(l.next(func(s *Signal) { s.Rejected += 1000 }))
		if d := g.Snapshot().PeersDoubted; d != 1 {
			t.Fatalf("peers doubted %d, want the liar found out", d)
		}
		if got, want := ownProposal(g), time.Duration(DefaultBackoff*float64(100*time.Millisecond)); got > want {
			t.Errorf("after the liar was found out: proposal %v; want at most %v (Backoff times the honest peer's)", got, want)
		}
		if got := g.Snapshot().Spacing; got > 125*time.Millisecond {
			t.Errorf("after the liar was found out: the fleet's spacing %v; want at most 125ms", got)
		}
	})
}

// A liar's acceptances stand in the count a reaction measures: the fleet seems to accept more
// than it does, and the spacing comes out short. Found out, its part goes: the reaction measures
// again without it, and the spacing comes back up (8 honest gates beside a liar that claimed 30
// acceptances every 10 ms kept 27 ms against a 10/s origin and took two or three more reactions,
// with their refusals, to reach 90 ms: TestFleetLiarAmongEight/rush at 15.5 % refused in CI).
func TestDoubtMeasuresAgainWithoutTheLiar(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, h, l := honestAndLiar(t)
		g.Observe(h.next(func(s *Signal) { s.Accepted += 10; s.Recent = 10 }))
		g.Observe(l.next(func(s *Signal) { s.Accepted += 30; s.Recent = 30 })) // within an unpaced fleet's credit
		refuseOne(t, g)
		if got := ownProposal(g); got != 25*time.Millisecond {
			t.Fatalf("a reaction with 40 accepted in the last second (10 the peer's, 30 the liar's): proposal %v; want 25ms", got)
		}
		// Paced, its next 30 overdraw its credit: found out.
		g.Observe(l.next(func(s *Signal) { s.Accepted += 30; s.Recent = 60 }))
		if d := g.Snapshot().PeersDoubted; d != 1 {
			t.Fatalf("peers doubted %d, want the liar found out", d)
		}
		if got := ownProposal(g); got != 100*time.Millisecond {
			t.Errorf("after the liar was found out: proposal %v; want 100ms (the 10 the honest peer accepted)", got)
		}
	})
}

// A peer's hold keeps the fleet from starting, so the next reaction finds few acceptances in the
// RateWindow: held by a liar's Retry-After for a second, then adopting its next refusal, 8
// honest gates measured none, backed off to a RateWindow (8 s a gate) and made no upgrade for two
// seconds (TestFleetLiarAmongEight/rotate, 2 of 400 runs under 80 % of the origin's rate). The
// count of the reaction before the hold stands.
func TestReactionAfterAHoldKeepsItsCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, h, l := honestAndLiar(t)
		g.Observe(h.next(func(s *Signal) { s.Accepted += 10; s.Recent = 10 }))
		refuseOne(t, g)
		if got := ownProposal(g); got != 100*time.Millisecond {
			t.Fatalf("a reaction with 10 accepted in the last second: proposal %v; want 100ms", got)
		}
		g.Observe(l.next(func(s *Signal) { s.Rejected++; s.RetryAfter = time.Hour }))
		for range 12 { // the hold lasts to the probe, a second; the honest peer is held too
			time.Sleep(interval)
			g.Observe(h.next(func(s *Signal) { s.Recent, s.Spacing, s.Epoch = 0, 100*time.Millisecond, 1 }))
			l.next(nil)
		}
		g.Observe(l.next(func(s *Signal) { s.Rejected++; s.Epoch = 2 }))
		if e := g.Snapshot().Epoch; e != 2 {
			t.Fatalf("epoch %d after the liar's refusal, want 2 (its reaction adopted)", e)
		}
		if got := ownProposal(g); got >= 200*time.Millisecond {
			t.Errorf("a reaction after a second under a peer's hold, none accepted in it: proposal %v; want the last reaction's count (10 a second) to stand: under 200ms", got)
		}
	})
}

// refuseOne starts an upgrade at g and reports it refused.
func refuseOne(t *testing.T, g *Gate) {
	t.Helper()
	p, err := g.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p.Forbidden(0)
}

// honestAndLiar makes a gate that trusts two peers, h (honest) and l (to lie), both live.
func honestAndLiar(t *testing.T) (g *Gate, h, l *fakePeer) {
	t.Helper()
	g = New(Config{})
	h, l = newFakePeer(5), newFakePeer(7)
	trust(t, g, h)
	trust(t, g, l)
	g.Observe(h.next(nil))
	return g, h, l
}

// ownProposal is g's own value for the fleet's spacing (without the NextSignal it costs).
func ownProposal(g *Gate) time.Duration {
	a := g.ctl.(*adaptive)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.proposal
}

func TestEpochAdoptionRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		p := newFakePeer(7)
		trust(t, g, p)
		for e := uint64(1); e <= 20; e++ { // a peer bumping its epoch 10 times an interval
			g.Observe(p.next(func(s *Signal) { s.Epoch = e }))
			time.Sleep(interval / 10)
		}
		if s := g.Snapshot(); s.Epoch != 20 || s.Spacing > 2*time.Second {
			t.Errorf("after 20 epochs in 2 intervals: epoch %d, spacing %v; want 20, at most 2 reactions (1s, 1.25s)", s.Epoch, s.Spacing)
		}
	})
}

func TestPeerRetryAfterBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		p, q := newFakePeer(7), newFakePeer(8)
		for range 4 { // both trusted
			g.Observe(p.next(nil))
			g.Observe(q.next(nil))
			time.Sleep(interval / 2)
		}
		if !isTrusted(g, 7) || !isTrusted(g, 8) {
			t.Fatal("peers 7 and 8 not trusted")
		}
		t0 := time.Now()
		g.Observe(p.next(func(s *Signal) { s.RetryAfter = 3 * time.Second })) // with no refusal: ignored
		if pm, at := take(t, g, t0); at != 0 {
			t.Errorf("start after a peer's Retry-After of 3s without a refusal at %v, want 0s", at)
		} else {
			pm.Succeeded()
		}
		// With a refusal, confirmed by another peer's refusal half a second later: held until
		// this gate's probe, peerProbe after the confirmation.
		t0 = time.Now()
		g.Observe(p.next(func(s *Signal) { s.RetryAfter, s.Rejected = 3*time.Second, s.Rejected+1 }))
		time.Sleep(interval / 2)
		g.Observe(q.next(nil))
		time.Sleep(4 * interval)
		g.Observe(q.next(func(s *Signal) { s.Rejected++ }))
		pm, at := take(t, g, t0)
		if want := 4*interval + interval/2 + peerProbe; at != want {
			t.Errorf("start after a peer's refusal with a Retry-After of 3s, confirmed, at %v; want %v (the probe)", at, want)
		}
		// The probe is accepted: the origin is open, the hold ends, and that peer's Retry-After
		// holds this gate no more.
		pm.Succeeded()
		if s := g.Snapshot(); s.HoldsContradicted != 1 {
			t.Errorf("holds contradicted %d, want 1", s.HoldsContradicted)
		}
		t0 = time.Now()
		g.Observe(p.next(func(s *Signal) { s.RetryAfter, s.Rejected = time.Hour, s.Rejected+1 }))
		if pm, at := take(t, g, t0); at != 0 {
			t.Errorf("start after a found-out peer's Retry-After at %v, want 0s", at)
		} else {
			pm.Succeeded()
		}
		// The other peer asks for an hour again and again: this gate's first probe under it is
		// accepted, and that was the last time it held this gate.
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				g.Observe(q.next(func(s *Signal) { s.RetryAfter, s.Rejected = time.Hour, s.Rejected+1 }))
				g.Observe(p.next(nil))
				time.Sleep(interval / 2)
			}
		}()
		synctest.Wait() // its first signal is in
		var waited, longest time.Duration
		t1 := time.Now()
		for range 120 {
			t2 := time.Now()
			pm, _ := take(t, g, t2)
			pm.Succeeded()
			w := time.Since(t2)
			waited, longest = waited+w, max(longest, w)
			time.Sleep(time.Second)
		}
		cancel()
		<-done
		total := time.Since(t1)
		t.Logf("under an endless peer Retry-After: waited %v of %v, %v at most (%+v)", waited, total, longest, g.Snapshot())
		if longest > peerProbe+interval || waited > peerProbe+interval {
			t.Errorf("waited %v of %v, %v at most; want one wait for the probe (at most %v), then none", waited, total, longest, peerProbe+interval)
		}
		if s := g.Snapshot(); s.HoldsContradicted != 2 {
			t.Errorf("holds contradicted %d, want 2 (each peer's once)", s.HoldsContradicted)
		}
	})
}

func TestHostilePeerCannotStopStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		p := newFakePeer(7)
		trust(t, g, p)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { // a trusted peer at its rate cap, every field extreme
			defer close(done)
			for e := uint64(1); ctx.Err() == nil; e++ {
				g.Observe(p.next(func(s *Signal) {
					s.Epoch, s.Demand, s.Recent, s.RetryAfter, s.Spacing = e, maxSignalDemand, 0, time.Hour, time.Hour
					s.Accepted, s.Rejected = s.Accepted+1, s.Rejected+1
				}))
				time.Sleep(interval / peerBurst)
			}
		}()
		t0 := time.Now()
		n := 0
		for time.Since(t0) < 2*time.Minute {
			wctx, wcancel := context.WithTimeout(t.Context(), 3*DefaultMax)
			pm, err := g.Wait(wctx)
			wcancel()
			if err != nil {
				t.Fatalf("Wait after %d starts, at %v: %v; want a start within 3 Max", n, time.Since(t0), err)
			}
			time.Sleep(10 * time.Millisecond) // the handshake
			pm.Succeeded()
			n++
		}
		cancel()
		<-done
		snap := g.Snapshot()
		t.Logf("%d starts in 2 minutes under a hostile peer (%+v)", n, snap)
		// Found out (its hold ended by an accepted probe, or its outcomes faster than any paced
		// fleet starts upgrades), it no longer holds the gate back: the gate runs at about its
		// callers' pace (one start per 10ms handshake).
		if snap.PeersDoubted+snap.HoldsContradicted == 0 {
			t.Errorf("peers doubted %d, holds contradicted %d; want the hostile peer found out", snap.PeersDoubted, snap.HoldsContradicted)
		}
		if n < 10000 {
			t.Errorf("%d starts in 2 minutes, want at least 10,000 of the 12,000 the handshake allows", n)
		}
	})
}

func TestSharingOtherModes(t *testing.T) {
	for _, cfg := range []Config{Reference(), {Mode: Fixed}, {Mode: Off}} {
		g := New(cfg)
		g.Observe(validSignal())
		if _, ok := g.NextSignal(); ok || g.Pending() != nil {
			t.Errorf("%s: NextSignal ok or Pending not nil; want no sharing", cfg.Mode)
		}
	}
	var g Gate // the zero Gate shares
	if g.Pending() == nil {
		t.Error("zero Gate: Pending is nil")
	}
	if s, ok := g.NextSignal(); !ok || s.Gate == 0 || s.Seq != 1 {
		t.Errorf("zero Gate: NextSignal = %+v, %v; want a signal with an id and seq 1", s, ok)
	}
}

func TestNextSignalBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		n := 0
		for range 2 * peerBurst {
			if _, ok := g.NextSignal(); ok {
				n++
			}
		}
		if n != maxSent {
			t.Errorf("%d signals in one interval, want %d (what peers apply, less one)", n, maxSent)
		}
		time.Sleep(interval)
		if _, ok := g.NextSignal(); !ok {
			t.Error("no signal in the next interval")
		}
	})
}

// TestRetryTakesTheGatesTurnsSooner checks that a refused caller, retrying, counts retryWeight
// times in its gate's demand: among 32 gates with a caller each, its gate's share of the fleet's
// pace is 8/39, not 1/32, so it starts again after about 5 fleet spacings instead of 32 (at 32
// workers: well within its 10 s budget instead of a 403 its client sees).
func TestRetryTakesTheGatesTurnsSooner(t *testing.T) {
	for _, tt := range []struct {
		name  string
		retry bool
		share float64
	}{
		{name: "plain caller", retry: false, share: 1.0 / 32},
		{name: "retry", retry: true, share: float64(retryWeight) / float64(retryWeight+31)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Config{})
				peers := make([]*fakePeer, 31) // 31 other gates, a caller each
				for i := range peers {
					peers[i] = newFakePeer(uint64(100 + i))
				}
				signal := func() {
					for _, p := range peers {
						g.Observe(p.next(func(s *Signal) { s.Demand = 1 }))
					}
				}
				for range 4 {
					signal()
					time.Sleep(interval / 2)
				}
				if n := g.Snapshot().Peers; n != 31 {
					t.Fatalf("%d peers trusted, want 31", n)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				defer func() { cancel(); <-done }()
				go func() { // the peers stay live
					defer close(done)
					for ctx.Err() == nil {
						time.Sleep(interval)
						signal()
					}
				}()
				succeed(t, g, 10)
				reject(t, g, 1) // paced, by what the fleet accepted in the last second
				spacing := g.Snapshot().Spacing
				t0 := time.Now()
				pm, err := g.wait(t.Context(), request{arrival: t0, retry: tt.retry})
				if err != nil {
					t.Fatal(err)
				}
				waited := time.Since(t0)
				pm.Succeeded()
				own := min(time.Duration(float64(spacing)/tt.share), DefaultMax) // at most the widest spacing
				t.Logf("%s: the fleet's spacing %v, waited %v (own spacing %v)", tt.name, spacing, waited, own)
				if waited > own+interval || waited < own-2*spacing {
					t.Errorf("%s waited %v after the refusal; want about its own spacing %v (a share of %.3f of the fleet's %v)", tt.name, waited, own, tt.share, spacing)
				}
			})
		})
	}
}

// TestBurstDoubtsPeersUntilHeard checks the first starts of a burst whose news comes late: three
// peers below this gate in id order, idle when last heard, get callers at the same moment as it,
// and their signals saying so arrive 20 ms later (processes waiting for a core take that long).
// With one caller the gate listens for 10 ms and starts (a lone request is not held); with two
// or more (most likely a burst over the fleet) it counts each peer as busy until heard from, and
// so leaves the fleet's first window (2) to the gates before it: before, it started at 10 ms,
// beside them, and the origin refused the excess.
func TestBurstDoubtsPeersUntilHeard(t *testing.T) {
	for _, tt := range []struct {
		name    string
		callers int
		first   time.Duration // the gate's first start, at the earliest
		before  time.Duration // ...and at the latest
	}{
		{name: "one caller", callers: 1, first: interval / 10, before: interval / 10},
		{name: "a burst", callers: 2, first: 20 * time.Millisecond, before: DefaultMax},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Config{})
				peers := []*fakePeer{newFakePeer(1), newFakePeer(2), newFakePeer(3)}
				signal := func(demand int) {
					for _, p := range peers {
						g.Observe(p.next(func(s *Signal) { s.Demand = demand }))
					}
				}
				for range 4 {
					signal(0)
					time.Sleep(interval / 2)
				}
				if n := g.Snapshot().Peers; n != 3 {
					t.Fatalf("%d peers, want 3", n)
				}
				t0 := time.Now()
				starts := make(chan time.Duration, tt.callers)
				for range tt.callers {
					go func() {
						pm, err := g.Wait(t.Context())
						if err != nil {
							t.Error(err)
							return
						}
						starts <- time.Since(t0)
						pm.Succeeded()
					}()
				}
				time.Sleep(20 * time.Millisecond)
				signal(1) // the peers' news of their callers, late
				first := <-starts
				if first < tt.first || first > tt.before {
					t.Errorf("%s: first start at %v, want within [%v, %v]", tt.name, first, tt.first, tt.before)
				}
				for range tt.callers - 1 {
					<-starts
				}
			})
		})
	}
}
