package gate

import "time"

// The Gate's methods that a transport calls to share one upgrade limit between processes (see
// the package documentation's call order).

// Observe applies a peer's signal, received now, to this gate (Adaptive mode; the other modes
// ignore it). Signals from this gate itself are ignored, so a transport may echo them. A signal is
// dropped, and counted in [Snapshot], if it is invalid, older than one already applied from the
// same gate (stale), beyond the per-peer rate (flooded), or from an id that has not been heard
// consistently yet (unknown): a new id counts only once heard before by an admission filter and
// then with 3 increasing seqs over 2 report intervals (from a transport that publishes every
// interval: its fourth signal), and at most 128 peers count. A peer whose claims do not add up
// (outcomes faster than any paced fleet starts upgrades, a rate its totals do not bear out) is
// doubted: its signals are dropped for 10 minutes (doubted) and what it caused is undone where
// nothing confirmed it; an accepted probe ends a peer's Retry-After hold (see doubt.go).
// Observe never blocks on a wait.
func (g *Gate) Observe(s Signal) { g.observeAt(s, time.Now()) }

func (g *Gate) observeAt(s Signal, now time.Time) {
	if a, ok := g.controller().(*adaptive); ok {
		a.observe(s, now)
	}
}

// ObserveBinary is [Gate.Observe] for a signal's encoding: bytes that [ParseSignal] rejects are
// counted as invalid and the error is returned.
func (g *Gate) ObserveBinary(b []byte) error {
	s, err := ParseSignal(b)
	if err != nil {
		if a, ok := g.controller().(*adaptive); ok {
			a.mu.Lock()
			a.fleet().invalid++
			a.mu.Unlock()
		}
		return err
	}
	g.Observe(s)
	return nil
}

// NextSignal returns the signal to publish to this gate's peers now. A transport calls it every
// ReportInterval (the peers expire a gate silent for 3 intervals) and whenever [Gate.Pending]
// fires, and publishes the signal when ok. ok is false outside Adaptive mode and when the last
// gate has made 29 signals in the current ReportInterval already, which is as many as its peers
// apply from one gate (the news then goes out with the next tick).
func (g *Gate) NextSignal() (s Signal, ok bool) {
	if a, isA := g.controller().(*adaptive); isA {
		return a.nextSignal(time.Now())
	}
	return Signal{}, false
}

// NextSignalDelay returns how long the transport should wait, from now, before its next call of
// [Gate.NextSignal] (unless [Gate.Pending] fires first): a quarter of ReportInterval while the
// gate is joining a fleet (its first two intervals after its first signal) or hears a gate that
// it does not trust yet, ReportInterval otherwise. Peers trust a gate after a few signals, so
// gates that meet trust each other within an interval instead of three. A transport that calls
// NextSignal at its first chance and then after each NextSignalDelay meets the ReportInterval
// contract. Outside Adaptive mode it returns ReportInterval.
func (g *Gate) NextSignalDelay() time.Duration {
	if a, ok := g.controller().(*adaptive); ok {
		return a.signalDelay(time.Now())
	}
	return g.cfg.ReportInterval
}

// Pending returns a channel that receives a value when the gate has news its peers should hear
// before the next tick: a rejection, a start or an acceptance while the fleet is paced, a closed
// origin or its reopening, a burst (twice the demand it last told them of). Notifications
// coalesce (the channel holds one). Outside Adaptive mode it returns nil, which never fires.
func (g *Gate) Pending() <-chan struct{} {
	a, ok := g.controller().(*adaptive)
	if !ok {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fleet().pending
}

// Estimate returns how long a caller arriving now would wait here before its upgrade may start,
// and the shortest wait that a live peer reported (less the time since it did; without live peers,
// here). A worker that can hand a request back to a queue that its peers also serve may do so when
// here is well above fleetBest (say by a second): the request then waits where the fleet's share
// of the limit is free, instead of in this gate's line. Both are estimates from the current pace;
// neither is a promise.
func (g *Gate) Estimate() (here, fleetBest time.Duration) {
	now := time.Now()
	switch c := g.controller().(type) {
	case *adaptive:
		c.mu.Lock()
		defer c.mu.Unlock()
		here = c.estimate(now)
		return here, c.fleetBest(now, here)
	case *reference:
		c.mu.Lock()
		defer c.mu.Unlock()
		here = max(c.next.Sub(now), 0)
	case *fixed:
		c.mu.Lock()
		defer c.mu.Unlock()
		here = max(c.next.Sub(now), 0)
	}
	return here, here
}
