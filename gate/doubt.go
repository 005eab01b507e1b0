package gate

import "time"

// Evidence against a peer. A peer earns trust with consistent signals (see peerTable.admit), but
// one that follows the protocol can still lie about what the origin did: report refusals it never
// had, to slow the fleet, or acceptances and a rate it never saw, to make the fleet storm the
// origin. A gate cannot see a peer's upgrades, but it can check a peer's claims against each
// other and against what it sees itself:
//
//   - outcomes: a paced fleet starts at most one upgrade per spacing. A peer whose totals grow
//     by more than twice that, beyond two windows of upgrades in flight, reports outcomes of
//     upgrades it cannot have made;
//   - its rate: a peer's Recent (accepted in the last RateWindow) counts at most what its
//     Accepted total grew by over the last one to two RateWindows;
//   - a Retry-After: a peer's hold lasts until this gate's turn to probe, at most peerProbe
//     (plus a report interval per busy gate before it) after it came. An acceptance this gate
//     then sees, of a start made under the hold, shows the origin open: the hold ends, and the
//     peer that asked for it may not hold this gate again for peerDoubtFor. An acceptance a
//     peer reports ends the hold too.
//
// A peer whose outcomes or rate do not add up is doubted for peerDoubtFor: its signals are
// dropped (SignalsDoubted), it no longer counts as a peer, and what it caused that nothing else
// confirmed is undone: the reaction it made this gate adopt (unless a refusal seen here or
// reported by another peer came since; that refusal makes it again with what the fleet accepted
// since), what its proposal added to the median (the own proposal comes down to at most Backoff
// times the highest of the other peers'), its hold, its place in the fleet's pace. And ids that
// became trusted after an episode of doubt began are on probation for doubtProbation: they may
// not slow this gate (no reaction, no hold, no epoch) and count with one caller's demand at most,
// so a liar that takes a new id starts without that power, while the peers trusted before keep it.
const (
	peerDoubtFor   = 10 * time.Minute
	doubtProbation = time.Minute
	peerProbe      = time.Second
	outcomeSlack   = 16 // outcomes a peer may report beyond its pace and two windows
)

// credit is what a peer's totals may still grow by: a bucket refilled at twice the fleet's pace
// and holding two windows' worth plus outcomeSlack, full while the fleet is not paced (a healthy
// origin accepts what it accepts). It also keeps the peer's Accepted total at the start of the
// current and the previous RateWindow, the bound on its Recent.
type credit struct {
	left    float64
	at      time.Time
	winAcc  uint64 // Accepted at the start of the current RateWindow sample...
	baseAcc uint64 // ...and of the previous one
	winAt   time.Time
}

// undo is the peer's reaction adopted last, and the gate's pace and window before it: what
// doubting that peer restores, while nothing else confirmed it.
type undo struct {
	by     uint64    // the peer; 0: nothing to undo
	at     time.Time // when
	pace   pace
	window int
}

// plausible checks a trusted peer's signal s (prev: the one applied before it) at now, and
// reports whether it adds up; it also moves the peer's credit and rate samples.
func (a *adaptive) plausible(p *peer, s, prev Signal, now time.Time) bool {
	c := &p.credit
	if c.at.IsZero() { // the first signal applied from it: the samples start here
		c.winAcc, c.baseAcc, c.winAt = prev.Accepted, prev.Accepted, now
	}
	if now.Sub(c.winAt) >= a.cfg.RateWindow {
		c.baseAcc, c.winAcc, c.winAt = c.winAcc, prev.Accepted, now
	}
	capacity := float64(2*a.window.size + outcomeSlack)
	if a.spacing <= a.cfg.Floor || a.spacing <= 0 || c.at.IsZero() {
		c.left = capacity
	} else {
		c.left = min(capacity, c.left+2*float64(now.Sub(c.at))/float64(a.spacing))
	}
	c.at = now
	c.left -= float64(s.Accepted-prev.Accepted) + float64(s.Rejected-prev.Rejected)
	return c.left >= -capacity
}

// recent is the peer's Recent as far as its totals bear it out.
func (p *peer) recent() int {
	grew := p.sig.Accepted - min(p.credit.baseAcc, p.sig.Accepted)
	return int(min(uint64(p.sig.Recent), grew))
}

// doubt drops peer p at now and undoes what it caused that nothing else confirmed.
func (a *adaptive) doubt(p *peer, now time.Time) {
	f := a.f
	claimed := p.recent() // its acceptances in the fleet's count
	p.doubted, p.trusted = now, false
	f.foundOut(now)
	f.peersDoubted++
	f.undoFrom(a, p.id)
	if hi, ok := f.highestProposal(now, peerLive*a.cfg.ReportInterval, a.cfg.Floor, a.cfg.widest()); ok {
		// Its proposal also stood in the median this gate's reactions back off from, and a
		// median of two is their mean: a reaction adopted from an honest peer, in the moments
		// that peer's epoch led the liar's, backed off from half the widest spacing, and undoing
		// the liar's own reaction does not reach it. So the own proposal comes down to at most
		// Backoff times the highest of the other live peers'.
		if limit := a.cfg.clampSpacing(time.Duration(float64(hi) * a.cfg.Backoff)); a.proposal > limit {
			a.lower(now, limit)
		}
	}
	if a.holds.peerBy == p.id {
		a.holds.peer = earlier(a.holds.peer, now)
	}
	if f.peerStarter == p.id {
		f.peerStartAt, f.peerStarter = time.Time{}, 0
	}
	a.refresh(now)
	if claimed > 0 && a.pace.refining(now, a.cfg.RateWindow) {
		// Its acceptances stood in the count the last reaction measured: measured again
		// without them (the count less what it claims now, or what the others' claims and
		// this gate's own acceptances add up to now, whichever is more), the spacing comes back
		// up (see remeasured).
		if s, ok := a.pace.remeasured(max(a.pace.measured-claimed, a.fleetRecent(now)), &a.cfg); ok {
			a.propose(now, s)
		}
	}
	a.queue.wakeHead()
}

// foundOut notes at now that a peer was found out (doubted, or its hold contradicted): the first
// in doubtProbation begins an episode of doubt.
func (f *fleet) foundOut(now time.Time) {
	if f.doubtAt.IsZero() || now.Sub(f.doubtAt) >= doubtProbation {
		f.doubtSince = now
	}
	f.doubtAt = now
}

// probationSince is when the episode of doubt at now began (ids trusted since are on probation
// for doubtProbation), or zero if none: no peer was found out in the last doubtProbation.
func (f *fleet) probationSince(now time.Time) time.Time {
	if f.doubtAt.IsZero() || now.Sub(f.doubtAt) >= 2*doubtProbation {
		return time.Time{}
	}
	return f.doubtSince
}

// credible reports whether peer p may slow this gate at now (make it react, hold it): not while
// it is on probation, trusted for less than doubtProbation and since an episode of doubt began
// (a peer found out, and another within doubtProbation of the one before, and so on). A liar that
// takes a new id after it is found out starts without that power, while the peers trusted before
// the liar was found out keep theirs. (Probation once covered the ids trusted up to
// doubtProbation before the first doubt too; in a fleet whose gates and liar met at the same
// time, the honest peers then could not make each other react, and 8 honest gates had 22-27 % of
// their attempts refused against a stalling, rushing or rotating liar.)
func (f *fleet) credible(p *peer, now time.Time) bool {
	return f.doubtAt.IsZero() || now.Sub(p.trustedAt) >= doubtProbation || p.trustedAt.Before(f.doubtSince)
}

// confirmed notes a refusal at now seen here (by 0) or reported by peer by, trusted since
// trustedAt: from other than the peer of the reaction adopted last, trusted before it came, it
// confirms that reaction, which doubting its peer then no longer undoes.
//
// It confirms that a reaction was due, not what the reaction measured. One adopted from a peer
// before the fleet's first acceptances of a burst counted none, and backed off to a RateWindow: a
// liar's refusal lands there (it reports no acceptances), and the burst's own refusals then
// confirmed its second-long pace for good. So the reaction is made again with what the fleet
// accepted since, as this refusal would have made it had the peer's not come first.
func (a *adaptive) confirmed(by uint64, trustedAt, now time.Time) {
	f := a.f
	if f.undo.by == 0 || f.undo.by == by || !trustedAt.Before(f.undo.at) {
		return
	}
	f.undo.by = 0
	if s, ok := a.pace.refined(a.fleetRecent(now), &a.cfg); ok {
		a.lower(now, s)
	}
}

// probeAt is when a peer's hold lets this gate start anyway: peerProbe after the hold came, plus
// a report interval per busy gate before it, so that one gate probes for the fleet first.
func (a *adaptive) probeAt(now time.Time) time.Time {
	rank := a.f.busyBetween(0, a.f.id, now, a.cfg.ReportInterval, time.Time{})
	return a.holds.peerSince.Add(peerProbe + time.Duration(rank)*a.cfg.ReportInterval)
}

// peerHold is the peer's hold as it holds this gate at now: until the hold ends or this gate's
// probe.
func (a *adaptive) peerHold(now time.Time) time.Time {
	if !a.holds.peer.After(now) {
		return a.holds.peer
	}
	return earlier(a.holds.peer, a.probeAt(now))
}

// acceptedUnderHold is an acceptance at now of a start made at start here: one made under a
// peer's hold shows the origin open (see contradict).
func (a *adaptive) acceptedUnderHold(start, now time.Time) {
	if a.f != nil && !start.Before(a.holds.peerSince) {
		a.contradict(now)
	}
}

// contradict ends the peer's hold at now, the origin having accepted an upgrade started under
// it: the peer that asked for it may not hold this gate again for peerDoubtFor, and the reaction
// it made this gate adopt is undone if nothing confirmed it.
func (a *adaptive) contradict(now time.Time) {
	h := &a.holds
	if !h.peer.After(now) {
		return
	}
	h.peer = now
	f := a.f
	if p, ok := f.find(h.peerBy); ok {
		p.holdBanned = now.Add(peerDoubtFor)
		f.foundOut(now)
		f.holdsContradicted++
		f.undoFrom(a, p.id)
	}
}

// undoFrom restores the pace and window from before the reaction adopted last, if peer by made
// it and nothing confirmed it since.
func (f *fleet) undoFrom(a *adaptive, by uint64) {
	if f.undo.by != by || by == 0 {
		return
	}
	epoch := a.epoch
	a.pace, a.window.size = f.undo.pace, f.undo.window
	a.epoch = epoch // epochs only grow: the peers compare them
	f.undo.by = 0
}
