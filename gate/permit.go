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
	p.g.controller().report(p, outcomeSuccess, time.Now(), 0)
}

// Forbidden reports an origin 403 on the upgrade, with the Retry-After it carried (0 if none).
func (p Permit) Forbidden(retryAfter time.Duration) {
	if p.g == nil {
		return
	}
	p.g.rejections.Add(1)
	p.g.controller().report(p, outcomeForbidden, time.Now(), retryAfter)
}

// Failed reports any other failure (timeout, 5xx, refused TCP): no change to pacing (in Adaptive
// mode it frees the permit's window slot).
func (p Permit) Failed() {
	if p.g == nil {
		return
	}
	p.g.failures.Add(1)
	p.g.controller().report(p, outcomeFailure, time.Now(), 0)
}
