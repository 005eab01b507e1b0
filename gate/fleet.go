package gate

import (
	"math/rand/v2"
	"time"
)

// The fleet: what an adaptive gate knows of the gates it shares an upgrade limit with. All of it
// is guarded by adaptive.mu and exists only once a transport has called Observe, NextSignal or
// Pending (process scope never allocates it, and then the gate is exactly the per-process one).

const (
	maxPeers        = 32            // peer table size; a flood of ids cannot grow it
	peerTrust       = 3             // increasing seqs before a new id counts...
	peerTrustSpan   = 4             // ...heard over at least 1/peerTrustSpan of a report interval
	joinIntervals   = 2             // report intervals after its first signal in which a gate is joining
	joinCadence     = 4             // signals per report interval while joining or hearing a newcomer
	peerLive        = 3             // report intervals of silence after which a peer no longer counts
	peerBurst       = 30            // signals per report interval applied from one peer; the rest are dropped
	settleIntervals = 2             // report intervals after a reaction in which peers' late news refines it
	staggerSteps    = 32            // a gate's turn after the last start comes ReportInterval/staggerSteps after the one before it
	maxSent         = peerBurst - 1 // signals NextSignal makes per report interval at most, within what peers apply
	filterBits      = 1 << 16       // per generation: 10,000 random ids a second pass it ~13 times a second
	filterHashes    = 3
)

// fleet is the peer table and the fleet's picture derived from it.
type fleet struct {
	id         uint64
	seq        uint64
	key        uint64        // keys the admission filter's hash, so ids cannot be crafted to collide
	pending    chan struct{} // buffered(1): news for the transport that should not wait for a tick
	sent       int           // signals made in the interval that began at sentAt
	sentAt     time.Time
	joinedAt   time.Time // the first signal made
	sentDemand int       // the demand in the last signal

	peers  [maxPeers]peer
	filter [2][filterBits / 64]uint64 // ids heard in the current and the previous generation
	genAt  time.Time                  // start of the current generation (2 report intervals)

	// The picture, recomputed whenever a signal is applied or a live peer falls silent.
	live        int       // trusted peers heard within peerLive intervals
	peerDemand  int       // their demand, summed
	peerDemand1 int       // their demand, each counted as at least 1, summed
	peerRecent  int       // their upgrades accepted in the last RateWindow, summed
	expiresAt   time.Time // the first time a live peer falls silent

	peerStartAt time.Time // when a peer's last start (announced, or its outcome) was heard of
	peerStarter uint64    // ...and that peer's id
	adoptedAt   time.Time // the last reaction adopted from a peer
	lostAt      time.Time // when the last live peer fell silent

	applied, invalid, stale, flooded, unknown int64
}

// peer is one entry of the table.
type peer struct {
	id      uint64
	seq     uint64
	first   time.Time // the first signal of the current run of consistent ones
	heard   time.Time // the last one applied (received: this gate's clock)
	run     int
	trusted bool
	quota   int // signals applied in the interval that began at quotaAt
	quotaAt time.Time
	sig     Signal    // the last one applied
	started time.Time // the last signal that announced a start
}

func newFleet() *fleet {
	return &fleet{id: nonZero(rand.Uint64()), key: rand.Uint64(), pending: make(chan struct{}, 1)}
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
	f.live, f.peerDemand, f.peerDemand1, f.peerRecent, f.expiresAt = 0, 0, 0, 0, time.Time{}
	silent := peerLive * a.cfg.ReportInterval
	for i := range f.peers {
		p := &f.peers[i]
		if p.id == 0 || !p.trusted || now.Sub(p.heard) >= silent {
			continue
		}
		f.live++
		f.peerDemand += p.sig.Demand
		f.peerDemand1 += max(p.sig.Demand, 1)
		f.peerRecent += p.sig.Recent
		if e := p.heard.Add(silent); f.expiresAt.IsZero() || e.Before(f.expiresAt) {
			f.expiresAt = e
		}
	}
	if wasLive && f.live == 0 {
		f.lostAt = now
	}
	a.settle(now)
}

// median returns the median of own and the spacings that the live peers in epoch propose, each
// kept within [lo, hi] (the mean of the middle two of an even number).
func (f *fleet) median(own time.Duration, epoch uint64, now time.Time, silent, lo, hi time.Duration) time.Duration {
	var v [maxPeers + 1]time.Duration
	v[0] = own
	n := 1
	for i := range f.peers {
		p := &f.peers[i]
		if p.id == 0 || !p.trusted || now.Sub(p.heard) >= silent || p.sig.Epoch != epoch {
			continue
		}
		x := max(min(p.sig.Spacing, hi), lo)
		j := n
		for ; j > 0 && v[j-1] > x; j-- {
			v[j] = v[j-1]
		}
		v[j] = x
		n++
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return v[n/2-1] + (v[n/2]-v[n/2-1])/2
}

// busyBetween is how many live peers with demand come after from and before to in id order,
// wrapping (from 0: every id below to, a gate's rank among the busy gates); those not heard from
// since doubt count as having demand.
func (f *fleet) busyBetween(from, to uint64, now time.Time, interval time.Duration, doubt time.Time) int {
	n := 0
	for i := range f.peers {
		p := &f.peers[i]
		if p.trusted && between(from, p.id, to) && (p.sig.Demand > 0 || p.heard.Before(doubt)) && now.Sub(p.heard) < peerLive*interval {
			n++
		}
	}
	return n
}

// stagger is this gate's turn after the last start heard of in the fleet: ReportInterval /
// staggerSteps for every busy live peer after the gate that made it and before this one, in id
// order (wrapping). Gates that the same news frees (their own pace let them start sooner) would
// otherwise all start at once, a spacing after it, and all but one be refused; so they go in
// turn, each a step after the one before it, and the first one's start, announced at once, holds
// the others for another spacing.
func (a *adaptive) stagger(now time.Time) time.Duration {
	f := a.f
	n := f.busyBetween(f.peerStarter, f.id, now, a.cfg.ReportInterval, time.Time{})
	return time.Duration(n) * (a.cfg.ReportInterval / staggerSteps)
}

// between reports whether x comes after from and before to, in ascending order wrapping around.
func between(from, x, to uint64) bool {
	if from < to {
		return from < x && x < to
	}
	return x > from || x < to
}

// share is this gate's part of the fleet's rate: its demand over the fleet's (1 without peers).
// A gate with no demand counts as one caller, the one about to come.
func (a *adaptive) share(now time.Time) float64 {
	if a.livePeers(now) == 0 {
		return 1
	}
	self := max(len(a.queue)+a.window.inflight, 1)
	return float64(self) / float64(self+a.f.peerDemand)
}

// fleetRecent is the upgrades accepted in the last RateWindow, by this gate and its live peers.
func (a *adaptive) fleetRecent(now time.Time) int {
	n := a.accepted.sum(now, a.cfg.RateWindow)
	if a.livePeers(now) > 0 {
		n += a.f.peerRecent
	}
	return n
}

// seen reports whether id was heard in this or the previous generation of the filter, and
// records it in this one.
func (f *fleet) seen(id uint64, now time.Time, gen time.Duration) bool {
	if now.Sub(f.genAt) >= gen {
		f.filter[1] = f.filter[0]
		if now.Sub(f.genAt) >= 2*gen {
			f.filter[1] = [filterBits / 64]uint64{}
		}
		f.filter[0] = [filterBits / 64]uint64{}
		f.genAt = now
	}
	h := mix(id ^ f.key)
	was := true
	for i := range filterHashes {
		b := (h >> (16 * i)) & (filterBits - 1)
		w, m := b/64, uint64(1)<<(b%64)
		if (f.filter[0][w]|f.filter[1][w])&m == 0 {
			was = false
		}
		f.filter[0][w] |= m
	}
	return was
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// lookup returns id's entry, admitting it if there is room: an empty slot, then the entry silent
// longest (if silent for peerLive intervals), then the untrusted entry heard longest ago.
func (f *fleet) lookup(id uint64, now time.Time, silent time.Duration) (*peer, bool) {
	var free, quiet, newcomer *peer
	for i := range f.peers {
		p := &f.peers[i]
		switch {
		case p.id == id:
			return p, true
		case p.id == 0:
			if free == nil {
				free = p
			}
		case now.Sub(p.heard) >= silent:
			if quiet == nil || p.heard.Before(quiet.heard) {
				quiet = p
			}
		case !p.trusted:
			if newcomer == nil || p.heard.Before(newcomer.heard) {
				newcomer = p
			}
		}
	}
	for _, p := range [...]*peer{free, quiet, newcomer} {
		if p != nil {
			*p = peer{id: id}
			return p, false
		}
	}
	return nil, false
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
		return // our own, echoed by the transport
	}
	c := &a.cfg
	silent := peerLive * c.ReportInterval
	p, known := (*peer)(nil), false
	for i := range f.peers {
		if f.peers[i].id == s.Gate {
			p, known = &f.peers[i], true
			break
		}
	}
	if !known {
		// A new id takes a slot only once the filter has heard it before (within two
		// generations): of a flood of random ids, each heard once, few get a slot, and those
		// only as newcomers that never count and that a live peer's slot is never given to.
		if !f.seen(s.Gate, now, 2*c.ReportInterval) {
			f.unknown++
			return
		}
		if p, known = f.lookup(s.Gate, now, silent); p == nil {
			f.flooded++
			return
		}
	}
	if known && s.Seq <= p.seq {
		f.stale++
		return
	}
	if now.Sub(p.quotaAt) >= c.ReportInterval {
		p.quota, p.quotaAt = 0, now
	}
	if p.quota >= peerBurst {
		f.flooded++
		return
	}
	p.quota++
	prev, had := p.sig, p.seq != 0
	if had && (s.Accepted < prev.Accepted || s.Rejected < prev.Rejected) {
		f.invalid++ // totals never go back
		return
	}
	if !p.trusted {
		if !had || now.Sub(p.heard) >= silent {
			p.run, p.first = 0, now
		}
		p.run++
		p.trusted = p.run >= peerTrust && now.Sub(p.first) >= c.ReportInterval/peerTrustSpan
	}
	p.seq, p.heard, p.sig = s.Seq, now, s
	if !p.trusted || !had {
		f.unknown++
		return
	}
	f.applied++
	a.refresh(now)
	if s.Started || (s.Accepted > prev.Accepted || s.Rejected > prev.Rejected) && now.Sub(p.started) >= c.ReportInterval {
		// A start, announced; or (from a peer that does not announce them) its outcome.
		f.peerStartAt, f.peerStarter = now, s.Gate
	}
	if s.Started {
		p.started = now
	}
	a.apply(s, prev, now)
}

// apply makes a trusted peer's news this gate's: acceptances reopen it, refusals count towards a
// closed origin, a higher epoch is a reaction to apply once, a Retry-After holds it too.
func (a *adaptive) apply(s, prev Signal, now time.Time) {
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
	}
	if s.Closed {
		a.origin.peerClosedAt = now
	}
	if s.Epoch > a.epoch {
		a.epoch = s.Epoch
		// At most one adopted reaction per report interval: a peer that bumps its epoch with
		// every signal can widen this gate's spacing to Max and its window to 1, no further.
		if now.Sub(f.adoptedAt) >= c.ReportInterval {
			f.adoptedAt = now
			a.react(now)
		}
	}
	if s.RetryAfter > 0 {
		a.holds.peerUntil(now, now.Add(s.RetryAfter), a.widest()) // a peer's Retry-After holds this gate too
	}
	if a.pace.refining(now, settleIntervals*c.ReportInterval) {
		// Peers report acceptances up to an interval late: a reaction made before they arrived
		// measured too few, so it may come down to what the fleet accepted.
		if s, ok := a.pace.refined(a.fleetRecent(now), c); ok {
			// The push that the reaction made with the old value comes down with it; a
			// Retry-After's hold does not.
			a.propose(now, s)
			a.holds.refine(a.spacing)
		}
	}
	a.wakeHead() // the pace may have changed
}

// nextSignal makes this gate's signal at now.
func (a *adaptive) nextSignal(now time.Time) (Signal, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.fleet()
	if now.Sub(f.sentAt) >= a.cfg.ReportInterval {
		f.sent, f.sentAt = 0, now
	}
	if f.sent >= maxSent {
		return Signal{}, false
	}
	f.sent++
	if f.joinedAt.IsZero() {
		f.joinedAt = now
	}
	a.expire(now)
	f.seq++
	f.sentDemand = len(a.queue) + a.window.inflight
	started := a.announce
	a.announce = false
	return Signal{
		Gate:       f.id,
		Seq:        f.seq,
		Epoch:      a.epoch,
		Accepted:   a.acceptedTotal,
		Rejected:   a.rejectedTotal,
		Recent:     min(a.accepted.sum(now, a.cfg.RateWindow), maxSignalRecent),
		Demand:     min(len(a.queue)+a.window.inflight, maxSignalDemand),
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
	fast := c.ReportInterval / joinCadence
	if f.joinedAt.IsZero() || now.Sub(f.joinedAt) < joinIntervals*c.ReportInterval {
		return fast
	}
	for i := range f.peers {
		// A newcomer: an id with a run of consistent signals (2: a flood of random ids never
		// has one) that is not trusted yet.
		if p := &f.peers[i]; p.id != 0 && !p.trusted && p.run >= 2 && now.Sub(p.heard) < peerLive*c.ReportInterval {
			return fast
		}
	}
	return c.ReportInterval
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
func (a *adaptive) fleetBest(now time.Time, d time.Duration) time.Duration {
	if a.livePeers(now) == 0 {
		return d
	}
	best := time.Duration(-1)
	silent := peerLive * a.cfg.ReportInterval
	for i := range a.f.peers {
		p := &a.f.peers[i]
		if p.id == 0 || !p.trusted || now.Sub(p.heard) >= silent {
			continue
		}
		w := max(p.sig.Wait-max(now.Sub(p.heard), 0), 0)
		if p.sig.Closed {
			w = max(w, d) // a closed peer is no better than here
		}
		if best < 0 || w < best {
			best = w
		}
	}
	return best
}

// Observe applies a peer's signal, received now, to this gate (Adaptive mode; the other modes
// ignore it). Signals from this gate itself are ignored, so a transport may echo them. A signal is
// dropped, and counted in [Snapshot], if it is invalid, older than one already applied from the
// same gate (stale), beyond the per-peer rate (flooded), or from an id that has not been heard
// consistently yet (unknown): a new id counts only once heard before by an admission filter and
// then with 3 increasing seqs over 2 report intervals (from a transport that publishes every
// interval: its fourth signal), and at most 32 peers count. Observe never blocks on a wait.
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
