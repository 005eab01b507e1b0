package gate

import "time"

// reference is the ReferenceMode controller: the reference design's rules on a schedule of
// reserved slots.
//
// Spacing starts at Floor. A rejection widens it to Widen if it was below, else doubles it,
// capped at Max and never below Floor (a Floor above Max wins); it resets the success streak and
// pushes the next slot to at least now + max(spacing, Retry-After). Only a rejection of an attempt
// that started after the last widening widens again: a burst of attempts refused together is one
// signal, not one doubling each. RelaxAfter successes in a row halve the spacing; a half below
// Widen snaps to Floor. Other failures change nothing. Reports take the lock with TryLock and are
// dropped when it is busy: a lost widening is harmless, the next rejection carries the same news.
type reference struct {
	schedule
	cfg       Config
	streak    int       // successes in a row since the last rejection or relaxation
	widenedAt time.Time // when spacing last widened: older attempts' rejections do not widen again
}

func newReference(c Config) *reference {
	return &reference{schedule: schedule{spacing: c.Floor}, cfg: c}
}

func (r *reference) report(p Permit, o outcome, now time.Time, retryAfter time.Duration) {
	if o == outcomeFailure || !r.mu.TryLock() {
		return
	}
	defer r.mu.Unlock()
	if o == outcomeSuccess {
		r.streak++
		if r.streak >= r.cfg.RelaxAfter {
			r.streak = 0
			r.spacing = r.cfg.relaxed(r.spacing)
		}
		return
	}
	r.streak = 0
	if p.start.After(r.widenedAt) {
		r.spacing = r.cfg.widened(r.spacing)
		r.widenedAt = now
	}
	push := now.Add(max(r.spacing, retryAfter))
	if push.After(r.next) {
		r.next = push
		r.seq++
	}
}

func (r *reference) snapshot(s *Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Spacing, s.Streak = r.spacing, r.streak
}

// widened returns the spacing after a rejection: Widen if s was below it, else doubled, capped at
// Max, never below Floor.
func (c Config) widened(s time.Duration) time.Duration {
	switch {
	case s < c.Widen:
		s = c.Widen
	case s > c.Max/2: // also keeps the doubling from overflowing
		s = c.Max
	default:
		s *= 2
	}
	return max(min(s, c.Max), c.Floor)
}

// relaxed returns the spacing after a streak of successes: halved, snapped to Floor when the half
// is below Widen, never below Floor.
func (c Config) relaxed(s time.Duration) time.Duration {
	s /= 2
	if s < c.Widen {
		s = c.Floor
	}
	return max(s, c.Floor)
}
