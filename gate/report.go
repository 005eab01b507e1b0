package gate

import "time"

// The outcome path of the Adaptive controller: a report moves the window, the pace, the holds
// and the closed-origin tracker together, under adaptive.mu.

// report applies one outcome report at time now.
func (a *adaptive) report(p Permit, o outcome, now time.Time, retryAfter time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if o == outcomeForbidden && retryAfter > 0 {
		a.holds.retryAfter(now.Add(retryAfter))
	}
	if !a.window.release(p.id) {
		return // reported before, or its lease ran out: the slot is no longer its own
	}
	a.origin.released(p.id)
	a.expire(now)
	defer a.queue.wakeHead()
	switch o {
	case outcomeSuccess:
		a.acceptedTotal++
		a.accepted.add(now, a.cfg.RateWindow)
		closed := a.origin.closed
		a.origin.accepted()
		a.origin.ownAcceptedAt = now
		if !a.firstOK.After(a.busyAt) && a.spacing == 0 {
			a.firstOK = now
		}
		a.acceptedUnderHold(p.start, now)
		if grew := a.succeeded(now); closed || a.spacing > 0 || grew && a.f != nil && a.f.live > 0 {
			// The peers reopen too; or, paced, they count this start in the fleet's pace; or,
			// in slow start, their windows grow with it.
			a.notify()
		}
	case outcomeForbidden:
		a.rejectedTotal++
		a.notify()
		a.forbidden(p.start, now)
		a.refusedByFleet(now, true)
		if a.f != nil {
			a.confirmed(0, time.Time{}, now)
			a.holds.confirmed(now, 0)
		}
	}
}

// refusedByFleet records a refusal at now, here or at a peer, and closes the gate when the origin
// refuses everything. One of the refusals must be this gate's own, so peers alone cannot close it.
func (a *adaptive) refusedByFleet(now time.Time, own bool) {
	if a.origin.refuse(now, own, a.cfg.RateWindow) && !a.justCutOff(now) {
		a.origin.closed = true
		a.notify()
		a.queue.wakeAll() // they are answered at once
	}
}

// justCutOff reports whether the gate lost its last live peer less than the widest spacing ago.
// Its refusals then may be the fleet using the limit up, which it no longer hears of (a worker cut
// off from the transport, still reaching the origin), not a closed origin: it closes only once it
// has been alone that long.
func (a *adaptive) justCutOff(now time.Time) bool {
	return a.livePeers(now) == 0 && a.f != nil && !a.f.lostAt.IsZero() && now.Sub(a.f.lostAt) < a.cfg.widest()
}

// succeeded grows the window and relaxes the spacing, each only while it is what limits, and
// reports whether the window grew.
func (a *adaptive) succeeded(now time.Time) bool {
	grew := a.growWindow(now, 1)
	a.relax(now, 1)
	return grew
}

// relax counts n paced successes, here or at the peers, and relaxes the spacing every RelaxRun
// of them while callers are queued behind it (here, or at a peer: its demand). Every gate of a
// fleet counts the same successes, so they relax together, and each step starts from the
// fleet's spacing: proposals that drifted apart meet again. With peers, a step comes no sooner
// than RelaxRun starts at half the spacing would allow, whatever successes a peer claims.
func (a *adaptive) relax(now time.Time, n int) {
	if a.spacing <= a.cfg.Floor || !a.queued(now) {
		return
	}
	if s, ok := a.pace.relaxStep(now, n, a.f != nil, &a.cfg); ok {
		a.propose(now, s)
	}
}

// queued reports whether callers wait behind the pace: here, or at a live peer (its demand, as
// of its last signal).
func (a *adaptive) queued(now time.Time) bool {
	return len(a.queue) > 0 || a.livePeers(now) > 0 && a.f.peerDemand > 0
}

// propose sets this gate's own value for the fleet's spacing, and the spacing from it.
func (a *adaptive) propose(now time.Time, s time.Duration) {
	a.proposal = s
	a.settle(now)
}

// lower proposes s, lower than the proposal, at now: a reaction's spacing comes down (peers'
// late news refines it, a refusal that confirms it measures again, a doubt undoes a liar's
// part), and the push the reaction made with the old value comes down with it; a Retry-After's
// hold does not.
func (a *adaptive) lower(now time.Time, s time.Duration) {
	a.propose(now, s)
	a.holds.refine(a.spacing)
}

// settle sets the spacing to the median of this gate's proposal and those of its live peers in
// the same epoch (a peer in an earlier one has not heard of the last reaction yet). Without
// peers it is the proposal. A median, so that one peer far off, late or hostile, moves it little.
func (a *adaptive) settle(now time.Time) {
	a.spacing = a.proposal
	if a.livePeers(now) > 0 {
		a.spacing = a.f.median(a.proposal, a.epoch, now, peerLive*a.cfg.ReportInterval, a.cfg.Floor, a.cfg.widest())
	}
}

// growWindow grows the window for n accepted upgrades (here, or at the peers), only while it is
// what limits: callers are queued or this gate's part of it is at least half full. It reports
// whether the window grew.
func (a *adaptive) growWindow(now time.Time, n int) bool {
	if len(a.queue) == 0 && a.window.inflight+1 < (a.limit(now)+1)/2 {
		return false
	}
	return a.window.grow(n, a.cfg.MaxWindow)
}

// forbidden reacts to a rejection of an attempt that started at start.
func (a *adaptive) forbidden(start, now time.Time) {
	if a.pace.rejected(start) {
		a.react(now)
	}
	a.holds.push(now, a.spacing) // the fleet's spacing: this gate's own, wider one then paces it from its last start
}

// react is one reaction to a rejection, this gate's or a peer's (its epoch already set):
// the window halves, and the spacing backs off from the fleet's, never below the rate the fleet
// was just measured to accept.
func (a *adaptive) react(now time.Time) {
	a.window.halve()
	paced := a.spacing > a.cfg.Floor
	measured := a.fleetRecent(now)
	if a.heldSinceReaction(now) {
		// A peer's hold kept the fleet from starting since the last reaction: what it
		// accepted in the RateWindow is what the hold let it, not what the origin would. The
		// last reaction's count stands (8 honest gates held by a liar's Retry-After for a
		// second, then adopting its next refusal, measured none, backed off to a RateWindow,
		// 8 s a gate, and made 0 upgrades for two seconds: TestFleetLiarAmongEight/rotate).
		measured = max(measured, a.pace.measured)
	}
	a.propose(now, a.pace.backoff(now, measured, &a.cfg))
	if !paced {
		a.rephase(now)
	}
}

// heldSinceReaction reports whether a peer's hold held this gate within the last RateWindow at
// now, and came within a RateWindow of the last reaction: that reaction's count was measured
// before the hold kept the fleet from starting.
func (a *adaptive) heldSinceReaction(now time.Time) bool {
	h := &a.holds
	if a.f == nil || h.peerSince.IsZero() || a.pace.widenedAt.IsZero() {
		return false
	}
	return a.peerHold(now).After(now.Add(-a.cfg.RateWindow)) && h.peerSince.Sub(a.pace.widenedAt) < a.cfg.RateWindow
}

// rephase spreads the starts of a fleet that has just become paced. The gates of a fleet in slow
// start all started within moments of each other, and each paces its next start from its own
// last one: left alone, they stay in step, all starting again together an own spacing later (and
// then again), while the origin's tokens of the time between go unused. So the gate with rank r
// among the busy gates (by id) takes the slot r+1 spacings after the reaction for its next start
// (at most an own spacing after it), and its own pace after that: the fleet's next starts come a
// spacing apart, the first when the origin may have a token again. A gate due later starts at its
// slot; one due sooner waits for it, but at most a spacing beyond its own pace.
func (a *adaptive) rephase(now time.Time) {
	a.slot.on = a.spacing > 0 && a.livePeers(now) > 0
	if a.slot.on {
		a.slot.at = now
		a.slot.rank = a.f.busyBetween(0, a.f.id, now, a.cfg.ReportInterval, time.Time{})
	}
}
