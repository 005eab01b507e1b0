package gate

import (
	"errors"
	"sync"
	"time"
)

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

	pace                   // the fleet's spacing, this gate's proposal, the reactions and relaxations
	window   window        // upgrades allowed in flight, and the permits in flight
	holds    holds         // no start before these: a rejection's push, Retry-Afters here and at the peers
	origin   closedTracker // a closed origin and its prober
	queue    line          // callers waiting, in arrival order
	accepted rateCounter   // upgrades accepted in the last RateWindow
	f        *fleet        // the peers; nil in process scope

	last     time.Time // the last start
	due      ownDue    // the next start by this gate's own pace, in a fleet
	busyAt   time.Time // when the last caller came to an idle gate (nothing queued or in flight)
	firstOK  time.Time // this gate's first acceptance since busyAt, if the fleet was unpaced then
	slot     phaseSlot // the next start's slot after the fleet's first reaction (see rephase)
	announce bool      // a start to tell the peers of in the next signal (the fleet is paced)
	retries  int       // callers in the queue that were refused already

	acceptedTotal, rejectedTotal uint64 // outcomes reported (first reports only)

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

// retryWeight is how many callers a caller that was refused already counts as in its gate's
// demand. The fleet's pace gives each gate a share by demand; at 32 gates that is a start every
// 32 spacings or so, and a refused request, retrying in its gate's line, would wait one such turn
// after another and run out of its ForbiddenBudget (10 s): a 403 its client sees. Counted 8 times
// over, it takes its gate's next turns sooner, from the other gates' plain callers.
const retryWeight = 8

// demand is this gate's demand as its share counts it: callers queued, a refused one retryWeight
// times, plus upgrades in flight.
func (a *adaptive) demand() int {
	return len(a.queue) + (retryWeight-1)*a.retries + a.window.inflight
}

// earliest is the first time the rate allows the next start. In a fleet it also moves the own
// pace's due time as the own spacing changes (see ownDue), so every reading of it, by a wait or an
// Estimate, keeps that time current. The reading is the place for it: the own spacing changes
// with the share, and the share with time alone (a peer's news expires), with no event to
// update it at.
func (a *adaptive) earliest(now time.Time) time.Time {
	t := a.holds.own
	own := a.ownSpacing(now)
	if !a.last.IsZero() {
		next := a.last.Add(own)
		if a.f != nil {
			next = a.due.next(now, a.last, own)
		}
		t = later(t, next)
	}
	if f := a.f; f != nil {
		t = later(t, a.peerHold(now))
		if a.spacing == 0 && a.firstOK.After(a.busyAt) && a.livePeers(now) > 0 {
			// The fleet's first round: this gate's first upgrade of a burst was accepted, and
			// the peers' outcomes of the same round, refusals among them, are on their way. Its
			// next start waits for them as long as a burst's first start listens (listen): from
			// hosts 25ms away, started at once it went into the bucket that round had emptied.
			t = later(t, a.firstOK.Add(a.listen()))
		}
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
			bound := min(time.Duration(a.livePeers(now)+1)*a.spacing, a.cfg.widest())
			if len(a.queue) > 0 && a.queue[0].retry && bound >= a.cfg.widest()/2 {
				// A refused request's retry, due by its own pace, waits for the others' turns
				// at most two spacings: with 64 gates a spacing per gate is the widest (8 s), and
				// on top of an own spacing of 2-3 s a retry that kept losing the turns to gates
				// freed sooner ran out of its ForbiddenBudget (10 s): a 403 its client saw (1 to
				// 5 of 300 in 4 runs of 5, 10 req/s for 30 s). Only in a fleet that wide (a
				// spacing per gate at least half the widest): 8 gates 25 ms away, whose turns are
				// 53 ms steps, were refused more of a 60-burst with it (10.5 a burst in 10 runs
				// against 8.2). Half the widest as the bound, or two spacings and a round of turns
				// (a step per peer, the echo in it), left 403s at 64.
				bound = min(bound, 2*a.spacing)
			}
			limit := later(a.last, a.busyAt).Add(own + bound)
			if a.slot.on {
				// The slot after the fleet's first reaction (see rephase), instead of the own
				// pace: sooner, or later. Held as above: a peer's hold only until this gate's
				// probe (holds.until, with the peer's hold in full, let a liar's Retry-After
				// hold a fleet that its reaction had rephased for all of it: 8 gates did 10
				// upgrades in 8 s, TestFleetLiarAmongEight/rotate).
				t = later(later(a.holds.own, a.peerHold(now)), earlier(a.slot.due(a.spacing, own), limit))
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
// heard from since as busy too. A gate left out still gets a start (see leftOutUntil), so peers
// can delay its starts but never stop them. It is 0 only in that case.
func (a *adaptive) limit(now time.Time) int {
	if a.f == nil || a.window.size <= 1 && a.spacing > 0 || a.livePeers(now) == 0 {
		return a.window.size
	}
	self := max(a.demand(), 1)
	if n := a.window.size * self / (self + a.f.peerDemand1); n >= 1 || a.spacing > 0 {
		return max(n, 1)
	}
	if rank := a.rank(now); rank < a.window.size || !now.Before(a.leftOutUntil(rank)) {
		return 1
	}
	return 0
}

// rank is this gate's place among the busy gates at now, by id: how many live peers with a
// lower id have callers (those not heard from since it became busy count as busy while it
// listens).
func (a *adaptive) rank(now time.Time) int {
	var doubt time.Time // peers not heard from since then count as busy
	if since := now.Sub(a.busyAt); since < a.listen() || a.demand() >= 2 && since < a.cfg.ReportInterval {
		// Two callers or more at once: most likely a burst over the fleet, whose news may
		// take longer than the echo (processes waiting for a core): until each peer is heard
		// from (they signal every interval), it counts as busy.
		doubt = a.busyAt
	}
	return a.f.busyBetween(0, a.f.id, now, a.cfg.ReportInterval, doubt)
}

// leftOutUntil is when a gate of this rank, left out of the fleet's window, gets a start anyway:
// peerLive ReportIntervals (the silence after which a peer stops counting) and three echoes
// after its last start (or since it became busy) for every window's worth of busy gates before
// it, counted by rank (rank/window of them, not whole windows' worths), at most the widest
// spacing. Counted in whole windows' worths, the gates of one worth waited alike and started
// together: 32 gates 25 ms away whose slow start had just emptied the bucket saw 8-9 of them
// refused at once about 480 ms into a burst (virtual time: 5 bursts of 60 above 15 % refused,
// none spread by rank). It is a liveness rule, not a pace: an honest fleet brings a
// left-out gate in sooner, by the window's growth or by its first reaction (paced, every gate
// gets its share). One interval for all let the gates of a fleet of 32 (or of hosts far from the
// origin, whose window grows slowly) all start at once an interval into a burst, and most be
// refused. The echoes are for hosts far from NATS and the origin: there, slow start's second
// round is refused just before peerLive intervals, and the news takes about two echoes more to
// reach the peers (at 25 ms one way, a refusal at the origin at about 280 ms is heard of at
// about 360 ms); a left-out gate that starts before it starts blind and is refused too. The
// echo never exceeds an interval, so a transport that delays echoes can hold a left-out gate
// by at most three intervals more (docs/gate-design.md).
func (a *adaptive) leftOutUntil(rank int) time.Time {
	size := max(a.window.size, 1)
	wait := time.Duration(peerLive) * a.cfg.ReportInterval
	if a.f != nil {
		wait += 3 * a.f.echo.latency
	}
	d := wait * time.Duration(max(rank, size)) / time.Duration(size)
	return later(a.last, a.busyAt).Add(min(d, a.cfg.widest()))
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
	a.due.started(now, a.ownSpacing(now))
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
		s.SignalsFlooded, s.SignalsUnknown, s.SignalsDoubted = f.flooded, f.unknown, f.doubted
		s.PeersDoubted, s.HoldsContradicted = f.peersDoubted, f.holdsContradicted
	} else {
		s.OwnSpacing = a.spacing
		s.FleetAccepted = float64(a.accepted.sum(now, a.cfg.RateWindow)) / a.cfg.RateWindow.Seconds()
	}
}
