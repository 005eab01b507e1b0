package gate

import (
	"errors"
	"sync"
	"time"
)

// A closed origin: closedRefusals refusals with nothing accepted, the first and the last at least
// closedSpans RateWindows apart. With nothing accepted the gate spaces its starts at least a
// RateWindow apart (1 s), and a token-bucket origin refills a token in 1/rate, so an origin that
// is only rate-limited (at 1/s or faster) accepts the second or third paced attempt; three paced
// refusals over two seconds mean the origin is refusing everything. A burst refused in the same
// instant is not enough however large: it is one signal, not several.
const (
	closedRefusals = 3
	closedSpans    = 2
)

// ErrClosed is returned by [Gate.Wait] in Adaptive mode while the origin is closed: no upgrade
// was accepted while several were refused (three, spread over at least two RateWindows). A closed
// origin is probed by one caller at a time at the widest spacing (max(Max, Floor)): a caller that
// may probe waits for the next probe slot if its context's deadline allows; every other caller gets
// ErrClosed at once, and so do the callers waiting when the gate closes. The first accepted
// upgrade reopens the gate. [Connect] returns the last 403 instead.
var ErrClosed = errors.New("gate: origin closed: upgrades refused and none accepted")

// errBudget ends a retry's wait when its forbidden budget is spent.
var errBudget = errors.New("gate: forbidden budget spent")

// adaptive is the Adaptive controller: a window of upgrades in flight, grown by slow start and
// halved on a rejection, and a spacing between starts that converges on the rate the origin
// accepts. The package documentation gives the rules and docs/gate-design.md the reasons.
//
// Its sub-states are types of their own, with no locks: mu guards them all, since one outcome
// moves several at once (a rejection halves the window, backs the pace off, pushes the holds and
// counts towards a closed origin). pace is embedded: a.spacing is the fleet's spacing.
type adaptive struct {
	mu sync.Mutex
	pace
	slot     phaseSlot // the next start's slot after the fleet's first reaction (see rephase)
	announce bool      // a start to tell the peers of in the next signal (the fleet is paced)
	busyAt   time.Time // when the last caller came to an idle gate (nothing queued or in flight)
	window   window    // upgrades allowed in flight, and the permits in flight
	last     time.Time // the last start
	holds    holds     // no start before these: a rejection's push, Retry-Afters here and at the peers
	queue    line      // callers waiting, in arrival order
	accepted rateCounter

	acceptedTotal, rejectedTotal uint64 // outcomes reported (first reports only)

	origin closedTracker // a closed origin and its prober

	f *fleet // the peers; nil in process scope

	cfg Config // immutable
}

func newAdaptive(c Config) *adaptive {
	return &adaptive{cfg: c, pace: newPace(c.Floor), window: newWindow(c.InitialWindow, c.MaxWindow)}
}

// ownSpacing is this gate's gap between starts: the fleet's spacing over its share, at most the
// widest spacing (so that no peer's claim can slow it further).
func (a *adaptive) ownSpacing(now time.Time) time.Duration {
	if a.spacing <= 0 || a.f == nil {
		return a.spacing
	}
	sh := a.share(now)
	if sh >= 1 {
		return a.spacing
	}
	return max(min(time.Duration(float64(a.spacing)/sh), a.cfg.widest()), a.spacing)
}

// earliest is the first time the rate allows the next start.
func (a *adaptive) earliest(now time.Time) time.Time {
	t := a.holds.own
	own := a.ownSpacing(now)
	if !a.last.IsZero() {
		t = later(t, a.last.Add(own))
	}
	if f := a.f; f != nil {
		t = later(t, a.holds.peer)
		if a.confirms(now) {
			// A peer sees a closed origin, and this gate has not been refused itself: its next
			// start confirms it without waiting for its pace (see confirms).
			return a.holds.until()
		}
		if a.spacing > 0 && a.livePeers(now) > 0 {
			// Peers delay a start by at most a spacing per gate (theirs and this one's), and at
			// most the widest spacing, beyond this gate's own pace: wide enough that the gates of
			// a busy fleet wait for their turns (gates held alike and released alike by a
			// tighter bound would start together), bounded so that no peer can stop this gate.
			limit := later(a.last, a.busyAt).Add(own + min(time.Duration(a.livePeers(now)+1)*a.spacing, a.cfg.widest()))
			if a.slot.on {
				// The slot after the fleet's first reaction (see rephase), instead of the own
				// pace: sooner, or later.
				t = later(a.holds.until(), earlier(a.slot.due(a.spacing, own), limit))
			}
			if !f.peerStartAt.IsZero() {
				// The fleet's pace: a spacing after the last start heard of anywhere in the fleet,
				// and this gate's turn after the gate that made it (see stagger).
				t = later(t, earlier(f.peerStartAt.Add(a.spacing+f.stagger(now, a.cfg.ReportInterval)), limit))
			}
		}
	}
	if a.origin.closed {
		t = later(t, a.probeSlot(now))
	}
	return t
}

// confirms reports whether this gate's next start may confirm a closed origin that a peer sees:
// it needs a refusal of its own to close (peers alone cannot close it), and paced a share of the
// fleet's spacing apart, the last gate of a fleet would make its first attempt only seconds after
// the others closed, its callers waiting all along. So once per widest spacing, a gate not closed
// and not refused since the last acceptance starts at once when a live peer reports a closed
// origin: if the origin is closed, the refusal closes this gate too.
func (a *adaptive) confirms(now time.Time) bool {
	return a.origin.confirms(now, len(a.queue) > 0, peerLive*a.cfg.ReportInterval, a.cfg.widest())
}

// probeSlot is a closed origin's next probe: the widest spacing after this gate's last refusal,
// and after the last one a peer reported (plus a fixed offset per gate, so that the same gate
// keeps probing for the fleet), but never more than live peers + 1 widest spacings after this
// gate's own.
func (a *adaptive) probeSlot(now time.Time) time.Time {
	n, id := a.livePeers(now), uint64(0)
	if n > 0 {
		id = a.f.id
	}
	return a.origin.probeSlot(n, id, a.cfg.widest())
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// limit is this gate's part of the window: the window times its share of the fleet's demand,
// counting each live peer as at least one caller (its demand is known as of its last signal, up
// to an interval ago, and a burst reaches every gate at once). While the fleet is not paced yet
// and that part is below one upgrade, the window's slots go one each to the busy gates in id
// order, so that a fleet in slow start has about a window in flight rather than one upgrade per
// gate. A burst reaches every gate at once, before any has heard of the others' callers: for its
// first ReportInterval/10 after it became busy, a gate counts the peers that it has not
// heard from since as busy too. A gate left out still gets a start after a ReportInterval
// without one (or since it became busy), so peers can delay its starts but never stop them. It is
// 0 only in that case.
func (a *adaptive) limit(now time.Time) int {
	if a.f == nil || a.window.size <= 1 && a.spacing > 0 || a.livePeers(now) == 0 {
		return a.window.size
	}
	self := max(len(a.queue)+a.window.inflight, 1)
	if n := a.window.size * self / (self + a.f.peerDemand1); n >= 1 || a.spacing > 0 {
		return max(n, 1)
	}
	var doubt time.Time // peers not heard from since then count as busy
	if now.Sub(a.busyAt) < a.cfg.listen() {
		doubt = a.busyAt
	}
	if now.Sub(later(a.last, a.busyAt)) >= a.cfg.ReportInterval || a.f.busyBetween(0, a.f.id, now, a.cfg.ReportInterval, doubt) < a.window.size {
		return 1
	}
	return 0
}

// tryGrant grants a start at now if the window and the spacing allow it.
func (a *adaptive) tryGrant(now time.Time) (grant, bool) {
	if a.window.inflight >= a.limit(now) || now.Before(a.earliest(now)) {
		return grant{}, false
	}
	if a.f != nil && a.confirms(now) {
		a.origin.confirmedAt = now
	}
	a.last = now
	a.slot.on = false
	if a.spacing > 0 && a.f != nil && a.f.live > 0 {
		// Paced, the peers count this start in the fleet's pace: they should hear of it now,
		// not when its handshake ends.
		a.announce = true
		a.notify()
	}
	return grant{start: now, id: a.window.take(now)}, true
}

// expire reclaims the slots of permits whose lease ran out unreported, and forgets the peers that
// fell silent (so that the spacing is the fleet's of now).
func (a *adaptive) expire(now time.Time) {
	a.livePeers(now)
	a.window.expire(now.Add(-a.cfg.Lease))
	a.origin.expire(now, a.cfg.Lease)
}

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
	a.propose(now, a.pace.backoff(now, a.fleetRecent(now), &a.cfg))
	if !paced {
		a.rephase(now)
	}
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

func (a *adaptive) snapshot(s *Snapshot) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	a.livePeers(now)
	s.Spacing, s.Streak = a.spacing, a.streak
	s.Window, s.InFlight, s.Queued = a.window.size, a.window.inflight, len(a.queue)
	s.Closed = a.origin.closed
	s.Epoch = a.epoch
	if f := a.f; f != nil {
		s.Peers = a.livePeers(now)
		s.OwnSpacing = a.ownSpacing(now)
		s.FleetAccepted = float64(a.fleetRecent(now)) / a.cfg.RateWindow.Seconds()
		s.SignalsApplied, s.SignalsInvalid, s.SignalsStale = f.applied, f.invalid, f.stale
		s.SignalsFlooded, s.SignalsUnknown = f.flooded, f.unknown
	} else {
		s.OwnSpacing = a.spacing
		s.FleetAccepted = float64(a.accepted.sum(now, a.cfg.RateWindow)) / a.cfg.RateWindow.Seconds()
	}
}
