package gate

import (
	"math/rand/v2"
	"time"
)

// The fleet: what an adaptive gate knows of the gates it shares an upgrade limit with. All of it
// is guarded by adaptive.mu and exists only once a transport has called Observe, NextSignal or
// Pending (process scope never allocates it, and then the gate is exactly the per-process one).

const (
	maxPeers        = 128           // peer table size (gates per account that share fully); a flood of ids cannot grow it
	peerTrust       = 3             // increasing seqs before a new id counts...
	peerTrustSpan   = 4             // ...heard over at least 1/peerTrustSpan of a report interval
	joinIntervals   = 2             // report intervals after its first signal in which a gate is joining
	joinCadence     = 4             // signals per report interval while joining or hearing a newcomer
	peerLive        = 3             // report intervals of silence after which a peer no longer counts
	peerBurst       = 30            // signals per report interval applied from one peer; the rest are dropped
	settleIntervals = 2             // report intervals after a reaction in which peers' late news refines it
	peerReactEvery  = 40            // report intervals between two reactions (or two Retry-After holds) that one peer may cause here
	staggerSteps    = 32            // a gate's turn after the last start comes ReportInterval/staggerSteps after the one before it
	maxSent         = peerBurst - 1 // signals NextSignal makes per report interval at most, within what peers apply
	filterBits      = 1 << 16       // per generation: 10,000 random ids a second pass it ~13 times a second
	filterHashes    = 3
)

// fleet is the peer table, the fleet's picture derived from it, and this gate's signals.
type fleet struct {
	id      uint64
	pending chan struct{} // buffered(1): news for the transport that should not wait for a tick
	sender

	peerTable
	picture

	peerStartAt time.Time // when a peer's last start (announced, or its outcome) was heard of
	peerStarter uint64    // ...and that peer's id
	adoptedAt   time.Time // the last reaction adopted from a peer
	lostAt      time.Time // when the last live peer fell silent
	echo        echo      // how long this gate's own signals take to come back

	undo       undo      // the reaction adopted last, while nothing else confirmed it (see doubt.go)
	doubtAt    time.Time // when a peer was last found out; zero: never
	doubtSince time.Time // when the episode of doubt that doubtAt is part of began (see foundOut)

	signalCounts
}

// signalCounts counts the peers' signals by what became of them (see [Snapshot]).
type signalCounts struct {
	applied, invalid, stale, flooded, unknown, doubted int64
	peersDoubted, holdsContradicted                    int64 // peers found out, and holds an accepted probe ended
}

func (c *signalCounts) count(v verdict) {
	switch v {
	case verdictApplied:
		c.applied++
	case verdictInvalid:
		c.invalid++
	case verdictStale:
		c.stale++
	case verdictFlooded:
		c.flooded++
	case verdictUnknown:
		c.unknown++
	case verdictDoubted:
		c.doubted++
	}
}

func newFleet() *fleet {
	return &fleet{id: nonZero(rand.Uint64()), peerTable: peerTable{key: rand.Uint64()}, pending: make(chan struct{}, 1)}
}

func nonZero(x uint64) uint64 {
	if x == 0 {
		return 1
	}
	return x
}

// fleet returns the fleet state, setting it up on first use.
func (a *adaptive) fleet() *fleet {
	if a.f == nil {
		a.f = newFleet()
	}
	return a.f
}

// notify tells the transport that there is news worth a signal now.
func (a *adaptive) notify() {
	if a.f == nil {
		return
	}
	select {
	case a.f.pending <- struct{}{}:
	default:
	}
}

// livePeers returns how many peers count at now, refreshing the picture if one fell silent.
func (a *adaptive) livePeers(now time.Time) int {
	f := a.f
	if f == nil || f.live == 0 {
		return 0
	}
	if !now.Before(f.expiresAt) {
		a.refresh(now)
	}
	return f.live
}

// refresh recomputes the fleet's picture at now.
func (a *adaptive) refresh(now time.Time) {
	f := a.f
	wasLive := f.live > 0
	f.picture = f.peerTable.picture(now, peerLive*a.cfg.ReportInterval, f.probationSince(now))
	if wasLive && f.live == 0 {
		f.lostAt = now
	}
	a.settle(now)
}

// stagger is this gate's turn after the last start heard of in the fleet: a step for every busy
// live peer after the gate that made it and before this one, in id order (wrapping). Gates that
// the same news frees (their own pace let them start sooner) would otherwise all start at once, a
// spacing after it, and all but one be refused; so they go in turn, each a step after the one
// before it, and the first one's start, announced at once, holds the others for another spacing.
// A step is ReportInterval/staggerSteps plus the echo's latency: the announcement of the start
// before must arrive before this gate's turn comes. (With steps of ReportInterval/staggerSteps
// alone, gates on hosts 25ms from NATS, whose news takes 50ms, started three at a time.)
func (f *fleet) stagger(now time.Time, interval time.Duration) time.Duration {
	n := f.busyBetween(f.peerStarter, f.id, now, interval, time.Time{})
	return time.Duration(n) * (interval/staggerSteps + f.echo.latency)
}

// share is this gate's part of the fleet's rate: its demand over the fleet's (1 without peers).
// A gate with no demand counts as one caller, the one about to come.
func (a *adaptive) share(now time.Time) float64 {
	if a.livePeers(now) == 0 {
		return 1
	}
	self := max(a.demand(), 1)
	// At least half an equal share: a peer that claims the most demand a signal can carry
	// takes at most the rest, and cannot space this gate's starts Max apart (and so keep it
	// from the acceptances that tell it the origin is open).
	return max(float64(self)/float64(self+a.f.peerDemand), 1/float64(2*(a.f.live+1)))
}

// fleetRecent is the upgrades accepted in the last RateWindow, by this gate and its live peers.
func (a *adaptive) fleetRecent(now time.Time) int {
	n := a.accepted.sum(now, a.cfg.RateWindow)
	if a.livePeers(now) > 0 {
		n += a.f.peerRecent
	}
	return n
}

// observe applies a peer's signal at now.
func (a *adaptive) observe(s Signal, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.fleet()
	if s.validate() != nil {
		f.invalid++
		return
	}
	if s.Gate == f.id {
		f.echo.heard(s.Seq, now, a.cfg.ReportInterval) // our own, echoed by the transport
		return
	}
	p, prev, v := f.admit(s, now, a.cfg.ReportInterval)
	if v == verdictApplied && !a.plausible(p, s, prev, now) {
		v = verdictDoubted
		a.doubt(p, now)
	}
	f.count(v)
	if v != verdictApplied {
		return
	}
	a.refresh(now)
	if s.Started || (s.Accepted > prev.Accepted || s.Rejected > prev.Rejected) && now.Sub(p.started) >= a.cfg.ReportInterval {
		// A start, announced; or (from a peer that does not announce them) its outcome.
		// Dated back by the news's way through the transport, about as long as this gate's
		// own signals take to come back (echo.low): from hosts 25ms from NATS the news is 50ms
		// old, and paced a spacing after the news the fleet started a spacing and 50ms apart.
		f.peerStartAt, f.peerStarter = now.Add(-f.echo.low), s.Gate
	}
	if s.Started {
		p.started = now
	}
	a.apply(p, s, prev, now)
}

// apply makes a trusted peer's news this gate's: acceptances reopen it, refusals count towards a
// closed origin, a higher epoch is a reaction to apply once, a Retry-After holds it too.
func (a *adaptive) apply(p *peer, s, prev Signal, now time.Time) {
	c := &a.cfg
	f := a.f
	if s.Accepted > prev.Accepted {
		a.origin.accepted()
		// The window is the fleet's: the peers' acceptances grow it too (at most doubling it
		// per signal, whatever the signal claims).
		a.growWindow(now, int(min(s.Accepted-prev.Accepted, uint64(a.window.size))))
		// ...and count towards relaxing the spacing: every gate counts the fleet's successes.
		a.relax(now, int(min(s.Accepted-prev.Accepted, uint64(c.RelaxRun))))
	}
	if s.Rejected > prev.Rejected {
		a.refusedByFleet(now, false)
		// A refusal confirms a reaction or a hold only from a peer trusted before it came: a
		// liar's next id cannot vouch for the last.
		a.confirmed(p.id, p.trustedAt, now)
		if p.trustedAt.Before(a.holds.peerSince) {
			a.holds.confirmed(now, p.id)
		}
	} else if s.Accepted > prev.Accepted && a.holds.peerBy != p.id && now.Sub(a.holds.peerSince) >= peerProbe {
		// Another gate's probe, most likely (an acceptance sooner may be of an upgrade started
		// before the hold): the origin accepts.
		a.contradict(now)
	}
	if s.Closed {
		a.origin.peerClosedAt = now
	}
	if s.Epoch > a.epoch && f.credible(p, now) {
		// A peer on probation does not even move the epoch: adopted, a liar's new epoch in
		// every signal left the honest peers' proposals an epoch behind and out of the median,
		// which was then this gate's and the liar's (an hour, kept to Max): 8 honest gates got
		// 5.4-6.6 of the origin's 10 upgrades/s in virtual time against a liar that stalled from
		// a new id every 4 s (TestFleetLiarAmongEight/rotate-stalling).
		a.epoch = s.Epoch
		// At most one adopted reaction per report interval, and one per peerReactEvery from
		// any one peer: a peer that lies about refusals (bumping its epoch with every signal)
		// backs this gate off once per 4s, which the fleet's successes relax again, instead
		// of widening its spacing to Max within two seconds and holding it there.
		if now.Sub(f.adoptedAt) >= c.ReportInterval && p.mayDisrupt(&p.reactedAt, now, peerReactEvery*c.ReportInterval) {
			f.adoptedAt = now
			f.undo = undo{by: p.id, at: now, pace: a.pace, window: a.window.size}
			a.react(now)
		}
	}
	if s.RetryAfter > 0 && s.Rejected > prev.Rejected && now.After(p.holdBanned) && f.credible(p, now) &&
		p.mayDisrupt(&p.heldAt, now, peerReactEvery*c.ReportInterval) {
		// A peer's Retry-After holds this gate too: one that came with a refusal it reports,
		// once per peerReactEvery from any one peer (and see holds.peerUntil, adaptive.peerHold).
		a.holds.peerUntil(now, now.Add(s.RetryAfter), a.cfg.widest(), p.id)
	}
	if a.pace.refining(now, settleIntervals*c.ReportInterval) {
		// Peers report acceptances up to an interval late: a reaction made before they arrived
		// measured too few, so it may come down to what the fleet accepted.
		if s, ok := a.pace.refined(a.fleetRecent(now), c); ok {
			a.lower(now, s)
		}
	}
	a.queue.wakeHead() // the pace may have changed
}

// nextSignal makes this gate's signal at now.
func (a *adaptive) nextSignal(now time.Time) (Signal, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.fleet()
	seq, ok := f.next(now, a.cfg.ReportInterval)
	if !ok {
		return Signal{}, false
	}
	a.expire(now)
	f.sentDemand = a.demand()
	started := a.announce
	a.announce = false
	f.echo.sent(seq, now)
	return Signal{
		Gate:       f.id,
		Seq:        seq,
		Epoch:      a.epoch,
		Accepted:   a.acceptedTotal,
		Rejected:   a.rejectedTotal,
		Recent:     min(a.accepted.sum(now, a.cfg.RateWindow), maxSignalRecent),
		Demand:     min(a.demand(), maxSignalDemand),
		Spacing:    min(a.proposal, maxSignalDuration),
		RetryAfter: min(max(a.holds.retry.Sub(now), 0), maxSignalDuration),
		Wait:       min(a.estimate(now), maxSignalDuration),
		Closed:     a.origin.closed,
		Started:    started,
	}, true
}

// signalDelay is how long the transport waits for the next signal at now: a quarter interval
// while this gate is joining a fleet (its first two intervals) or hears a gate that it does not
// trust yet, so that gates that meet trust each other within an interval; else an interval.
func (a *adaptive) signalDelay(now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := &a.cfg
	f := a.fleet()
	if f.joining(now, c.ReportInterval) || f.newcomer(now, peerLive*c.ReportInterval) {
		return c.ReportInterval / joinCadence
	}
	return c.ReportInterval
}

// listen is how long after it became busy a gate counts the peers it has not heard from since
// as busy: ReportInterval/10, plus the time its own signals take to come back through the
// transport (the peers' news of the same burst takes about as long to arrive). On loopback
// that adds a millisecond or so; for gates on hosts 25ms from NATS, 50ms: a gate that stopped
// doubting sooner would take the first burst's slots as if no peer had callers.
func (a *adaptive) listen() time.Duration {
	d := a.cfg.ReportInterval / 10
	if a.f != nil {
		d += a.f.echo.latency
	}
	return d
}

// echo measures how long this gate's signals take to come back to it through the transport
// (NATS echoes a publisher's own messages): the latency of the peers' news, too. It follows a
// rise at once and a fall by an eighth per echo, and never exceeds a report interval, so a
// transport that delays or forges echoes can slow the first starts of a burst by at most that.
// low is the same way's lower estimate (a fall at once, a rise by an eighth): how old a peer's
// news of a start is when it arrives, at most an interval, so a forged echo can bring a start
// forward by at most that, and never past the gate's own pace.
type echo struct {
	sentAt  [echoRing]time.Time // when signal seq was made, at seq % echoRing (zero once echoed)
	seq     uint64              // the last signal made
	latency time.Duration
	low     time.Duration // the other way round: a fall at once, a rise by an eighth (the way's fixed part)
	echoed  bool          // an echo came back (low is set)
}

// echoRing is how many signals' times echo keeps: at the joining cadence, 8 cover two report
// intervals of latency.
const echoRing = 8

func (e *echo) sent(seq uint64, now time.Time) { e.seq, e.sentAt[seq%echoRing] = seq, now }

// heard records the echo of signal seq at now; only the first echo of one of the last echoRing
// signals counts.
func (e *echo) heard(seq uint64, now time.Time, interval time.Duration) {
	at := &e.sentAt[seq%echoRing]
	if seq > e.seq || seq+echoRing <= e.seq || at.IsZero() {
		return
	}
	d := min(max(now.Sub(*at), 0), interval)
	*at = time.Time{}
	if d > e.latency {
		e.latency = d
	} else {
		e.latency -= (e.latency - d) / 8
	}
	if d < e.low || !e.echoed {
		e.low, e.echoed = d, true
	} else {
		e.low += (d - e.low) / 8
	}
}

// estimate is how long a caller arriving at now would wait here.
func (a *adaptive) estimate(now time.Time) time.Duration {
	d := max(a.earliest(now).Sub(now), 0)
	if !a.origin.closed {
		d += time.Duration(len(a.queue)) * a.ownSpacing(now)
	}
	return d
}

// fleetBest is the shortest wait a live peer reported, less the time since it did (here without
// live peers).
func (a *adaptive) fleetBest(now time.Time, here time.Duration) time.Duration {
	if a.livePeers(now) == 0 {
		return here
	}
	return a.f.bestWait(now, peerLive*a.cfg.ReportInterval, here)
}
