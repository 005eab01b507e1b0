package gate

import "time"

// Permit is one granted start, returned by [Gate.Wait]. Report the upgrade's outcome on it exactly
// once. The reports never block on I/O or a wait. A zero Permit ignores reports.
type Permit struct {
	g     *Gate
	start time.Time
	id    uint64 // Adaptive: the window slot it holds (0 = none)
}

// Start returns the time the permit's slot began.
func (p Permit) Start() time.Time { return p.start }

// Succeeded reports that the upgrade succeeded.
func (p Permit) Succeeded() {
	if p.g == nil {
		return
	}
	p.g.successes.Add(1)
	if p.g.mode() == Adaptive {
		p.g.reportAdaptive(p, outcomeSuccess, time.Now(), 0)
		return
	}
	p.g.succeeded()
}

// Forbidden reports an origin 403 on the upgrade, with the Retry-After it carried (0 if none).
func (p Permit) Forbidden(retryAfter time.Duration) {
	if p.g == nil {
		return
	}
	p.g.rejections.Add(1)
	if p.g.mode() == Adaptive {
		p.g.reportAdaptive(p, outcomeForbidden, time.Now(), retryAfter)
		return
	}
	p.g.forbidden(p.start, time.Now(), retryAfter)
}

// Failed reports any other failure (timeout, 5xx, refused TCP): no change to pacing (in Adaptive
// mode it frees the permit's window slot).
func (p Permit) Failed() {
	if p.g == nil {
		return
	}
	p.g.failures.Add(1)
	if p.g.mode() == Adaptive {
		p.g.reportAdaptive(p, outcomeFailure, time.Now(), 0)
	}
}

// forbidden applies a rejection, at time now, of an attempt that started at start (Reference
// rules 3 and 4).
func (g *Gate) forbidden(start, now time.Time, retryAfter time.Duration) {
	c := g.config()
	if c.Mode != ReferenceMode || !g.mu.TryLock() {
		return
	}
	defer g.mu.Unlock()
	g.streak = 0
	if start.After(g.widenedAt) {
		g.spacing = c.widened(g.spacing)
		g.widenedAt = now
	}
	push := now.Add(max(g.spacing, retryAfter))
	if push.After(g.next) {
		g.next = push
		g.seq++
	}
}

// succeeded relaxes after a streak (Reference rule 5).
func (g *Gate) succeeded() {
	c := g.config()
	if c.Mode != ReferenceMode || !g.mu.TryLock() {
		return
	}
	defer g.mu.Unlock()
	g.streak++
	if g.streak >= c.RelaxAfter {
		g.streak = 0
		g.spacing = c.relaxed(g.spacing)
	}
}
