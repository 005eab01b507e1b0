package gate

import (
	"context"
	"time"
)

// mayProbe reports whether r may become the closed origin's prober at now.
func (a *adaptive) mayProbe(r request, now time.Time) bool {
	return !r.retry && !a.origin.probing && (r.probeBy.IsZero() || !a.earliest(now).After(r.probeBy))
}

// wait is the Adaptive wait. The fast path (nobody queued, window and spacing open) takes the
// lock once and does not allocate. Otherwise the caller queues in arrival order and, whenever it
// is woken or its timer fires, looks again: refused (closed, out of budget), granted at the head
// of the line, or back to sleep for as long as the head's next chance is away.
func (a *adaptive) wait(ctx context.Context, now time.Time, r request) (grant, error) {
	a.mu.Lock()
	a.arrive(now)
	probe := false
	if a.origin.closed {
		if !a.mayProbe(r, now) {
			a.mu.Unlock()
			return grant{}, ErrClosed
		}
		probe, a.origin.probing = true, true
	} else if len(a.queue) == 0 {
		if gr, ok := a.tryGrant(now); ok {
			a.mu.Unlock()
			return gr, nil
		}
	}
	w := &waiter{arrival: r.arrival, wake: make(chan struct{}, 1), probe: probe, retry: r.retry}
	a.queue.insert(w, r.retry)
	if r.retry {
		a.retries++
	}
	began := now
	for {
		if err := a.refusal(w, r, now); err != nil {
			a.leave(w)
			a.mu.Unlock()
			return grant{waited: now.Sub(began)}, err
		}
		d := time.Duration(-1) // wait for a wake-up only
		if a.queue[0] == w {
			if gr, ok := a.grantHead(w, now); ok {
				a.mu.Unlock()
				gr.waited = now.Sub(began)
				return gr, nil
			}
			d = a.headDelay(now)
		}
		if !r.deadline.IsZero() && (d < 0 || r.deadline.Sub(now) < d) {
			d = r.deadline.Sub(now)
		}
		a.mu.Unlock()
		awaitWake(ctx, w.wake, d)
		a.mu.Lock()
		now = time.Now()
		if err := ctx.Err(); err != nil {
			a.leave(w)
			a.mu.Unlock()
			return grant{waited: now.Sub(began)}, err
		}
		a.expire(now)
	}
}

// arrive notes a caller coming to the gate at now: a burst tells the peers at once, and a caller
// that finds the gate idle marks when it became busy.
func (a *adaptive) arrive(now time.Time) {
	a.expire(now)
	if f := a.f; f != nil && f.live > 0 {
		// A burst here (twice the demand the peers last heard of)
		// changes their shares: they should hear of it before they start their next upgrades.
		// So does the first caller of a gate whose last signal said idle: a burst over many gates
		// gives most of them one caller each.
		if d := a.demand() + 1; d >= 2*f.sentDemand {
			a.notify()
		}
	}
	if len(a.queue)+a.window.inflight == 0 {
		a.busyAt = now
	}
}

// refusal is the error that ends w's wait at now without a start, or nil.
func (a *adaptive) refusal(w *waiter, r request, now time.Time) error {
	switch {
	case a.origin.closed && (!w.probe || !r.probeBy.IsZero() && a.earliest(now).After(r.probeBy)):
		return ErrClosed
	case !r.deadline.IsZero() && (!now.Before(r.deadline) || a.holds.own.After(r.deadline)):
		return errBudget // no start can come in time (the hold moves back only by peers' refinement)
	}
	return nil
}

// grantHead grants w, the head of the line, a start at now if the window and the spacing allow.
func (a *adaptive) grantHead(w *waiter, now time.Time) (grant, bool) {
	gr, ok := a.tryGrant(now)
	if !ok {
		return grant{}, false
	}
	a.queue.popHead()
	if w.retry {
		a.retries--
	}
	if w.probe && a.origin.closed {
		a.origin.probeGranted(gr.id, now)
	}
	a.queue.wakeHead()
	return gr, true
}

// headDelay is how long the head of the line, refused a start at now, sleeps before it looks
// again (unless woken): until the pace allows, and while the window is full until the oldest
// lease ends, or while it is left out of the fleet's window until its turn comes or a peer's news.
func (a *adaptive) headDelay(now time.Time) time.Duration {
	d := max(a.earliest(now).Sub(now), 0)
	if l := a.limit(now); l == 0 {
		until := a.leftOutUntil(a.rank(now))
		if e := a.busyAt.Add(a.listen()); e.After(now) {
			until = earlier(until, e)
		}
		d = max(d, until.Sub(now)) // or a peer's news
	} else if a.window.inflight >= l {
		if oldest, ok := a.window.slots.oldest(); ok {
			d = max(d, oldest.Add(a.cfg.Lease).Sub(now))
		}
	}
	return d
}

// awaitWake blocks until wake fires, d passes (d < 0: never) or ctx is done.
func awaitWake(ctx context.Context, wake <-chan struct{}, d time.Duration) {
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-wake:
	case <-timer:
	case <-ctx.Done():
	}
}

// leave takes w out of the queue without a start.
func (a *adaptive) leave(w *waiter) {
	head := a.queue.remove(w)
	if w.retry {
		a.retries--
	}
	if w.probe {
		a.origin.left()
	}
	if head {
		a.queue.wakeHead()
	}
}
