package gate

import "time"

// minSpacing is the spacing below which relaxing goes to Floor: at more than 1000 starts per
// second the window, not the spacing, is what limits.
const minSpacing = time.Millisecond

// pace is the Adaptive controller's spacing between starts and the reactions that set it.
//
// spacing is the fleet's spacing: the gap between starts that the whole fleet of gates sharing
// the limit may make. This gate's own gap is spacing divided by its share of the fleet's demand;
// without peers the share is 1 and the two are the same. Each gate of a fleet has its own value
// for it, proposal, which its reactions and relaxations set; spacing is the median of the
// proposals of the gates in the same epoch (without peers, proposal itself), which the owner sets
// from the peer table. A reaction backs the spacing off by Backoff, never below the rate the
// fleet was measured to accept; a run of paced successes relaxes it in growing steps.
//
// Its decisions take the time as a parameter; adaptive.mu guards it.
type pace struct {
	spacing   time.Duration // the fleet's gap between consecutive starts
	proposal  time.Duration // this gate's own value for it
	epoch     uint64        // reactions so far, this gate's and those adopted from peers
	widenedAt time.Time     // the last reaction: rejections of attempts started before it are not news
	backedOff time.Duration // the last reaction's spacing before the measured floor
	measured  int           // the last reaction's count of upgrades accepted in the RateWindow
	streak    int           // paced successes (here and at the peers) towards the next relaxation step
	steps     int           // relaxation steps since the last rejection (each cuts harder)
	relaxedAt time.Time     // the last relaxation step
}

func newPace(floor time.Duration) pace { return pace{spacing: floor, proposal: floor} }

// rejected notes a rejection of an attempt that started at start, and reports whether it is news
// to react to: the attempt started after the last reaction (and the epoch is bumped for it).
// Either way the relaxation starts over.
func (p *pace) rejected(start time.Time) bool {
	p.streak, p.steps = 0, 0
	if !start.After(p.widenedAt) {
		return false
	}
	if p.epoch+1 < maxSignalEpoch {
		p.epoch++
	}
	return true
}

// backoff is a reaction at now, this gate's or a peer's, when the fleet accepted measured
// upgrades in the last RateWindow: it returns the proposal, the spacing backed off by Backoff
// but never below the rate measured (RateWindow / measured, a RateWindow when none were).
func (p *pace) backoff(now time.Time, measured int, c *Config) time.Duration {
	p.widenedAt = now
	p.streak, p.steps = 0, 0
	p.backedOff = time.Duration(float64(p.spacing) * c.Backoff)
	p.measured = measured
	return p.reaction(c)
}

// reaction is the last reaction's proposal from what it backed off from and the count it
// measured (backoff's rule; refined and remeasured set the count again).
func (p *pace) reaction(c *Config) time.Duration {
	return c.clampSpacing(max(p.backedOff, c.RateWindow/time.Duration(max(p.measured, 1))))
}

// refining reports whether late news at now may still refine the last reaction: within window
// of it, before any relaxation step.
func (p *pace) refining(now time.Time, window time.Duration) bool {
	return now.Sub(p.widenedAt) < window && p.steps == 0
}

// refined takes a later count of what the fleet accepted around the last reaction (peers report
// up to an interval late) and returns the lower proposal it makes, if it does.
func (p *pace) refined(measured int, c *Config) (time.Duration, bool) {
	if measured <= p.measured {
		return 0, false
	}
	p.measured = measured
	s := p.reaction(c)
	return s, s < p.proposal
}

// remeasured takes the count of what the fleet accepted around the last reaction once a doubted
// peer's claims are dropped from it, and returns the higher proposal it makes, if it does. A
// peer that claims acceptances it never had inflates the count a reaction measures (the rate
// the fleet was just seen to accept), and the spacing comes out too short: 8 honest gates
// beside a liar claiming 30 acceptances every 10 ms backed off to 27 ms against a 10/s origin,
// kept it after the liar was found out 20 ms later, and took two or three more reactions, with
// their refusals, to reach 90 ms.
func (p *pace) remeasured(measured int, c *Config) (time.Duration, bool) {
	if measured >= p.measured {
		return 0, false
	}
	p.measured = measured
	s := p.reaction(c)
	return s, s > p.proposal
}

// relaxStep counts n paced successes at now (the owner calls it only while the spacing is above
// Floor and callers are queued behind it) and returns the proposal of a relaxation step when one
// is due: every RelaxRun successes, the k-th step since the last rejection cutting k·(1-Relax),
// at most half, and below minSpacing to Floor. shared (the gate has a fleet): a step comes no
// sooner than RelaxRun starts at half the spacing would allow, whatever successes a peer claims.
func (p *pace) relaxStep(now time.Time, n int, shared bool, c *Config) (time.Duration, bool) {
	p.streak += n
	if p.streak < c.RelaxRun {
		return 0, false
	}
	if shared && now.Sub(p.relaxedAt) < time.Duration(c.RelaxRun)*p.spacing/2 {
		p.streak = c.RelaxRun // the step waits for the next success
		return 0, false
	}
	p.streak = 0
	p.steps++
	p.relaxedAt = now
	cut := (1 - c.Relax) * float64(p.steps)
	s := time.Duration(float64(p.spacing) * max(1-cut, 0.5))
	if s < minSpacing {
		s = 0
	}
	return max(s, c.Floor), true
}

// phaseSlot is the slot of a gate's first start after its fleet became paced (see
// adaptive.rephase): the rank+1-th fleet spacing after the reaction made at at.
type phaseSlot struct {
	on   bool // the next start takes it
	rank int  // this gate's place among the busy gates, by id
	at   time.Time
}

// due is the slot's time, at most this gate's own spacing after the reaction.
func (s phaseSlot) due(spacing, own time.Duration) time.Time {
	return s.at.Add(min(time.Duration(s.rank+1)*spacing, own))
}

// widest is the widest spacing: a closed origin's probes, and the bound on what peers can ask.
func (c *Config) widest() time.Duration { return max(c.Max, c.Floor) }

// clampSpacing keeps a fleet spacing within [Floor, max(Max, Floor)].
func (c *Config) clampSpacing(s time.Duration) time.Duration {
	return max(min(s, c.Max), c.Floor)
}

// ownDue is when a gate's own pace allows its next start in a fleet: an own spacing (the fleet's
// spacing over its share) after its last start. The share moves with the news of the peers'
// demand, and the spacing with the relaxations the gates adopt together, so an own spacing
// shrinks at every gate of a fleet at about the same moment; counted from each one's last start,
// the shorter one releases at once every gate whose last start is that long ago, together, and
// the origin refuses all but the first. So a shrinking own spacing shortens only what is left of
// the wait, in proportion, and each gate keeps its place in the fleet's round; a growing one
// counts from the last start (a reaction must not wait for the round to end).
type ownDue struct {
	at  time.Time     // the next start by the own pace
	own time.Duration // the own spacing it was set with
}

// started sets the next start after a start at now with the own spacing own.
func (d *ownDue) started(now time.Time, own time.Duration) { d.at, d.own = now.Add(own), own }

// next is the next start at now, with the own spacing own and the last start last.
func (d *ownDue) next(now, last time.Time, own time.Duration) time.Time {
	switch {
	case own > d.own:
		d.at = last.Add(own)
	case own < d.own && d.at.After(now):
		left := float64(d.at.Sub(now)) * float64(own) / float64(d.own)
		d.at = now.Add(time.Duration(left))
	}
	d.own = own
	return d.at
}
