package login

import "time"

// storeRetry is how long after a failed call the pool's store is left alone: refreshes in
// between go ahead without it at once, instead of each waiting StoreTimeout for a store that
// is down. The watch keeps trying, and its first answer ends the outage.
const storeRetry = 5 * time.Second

// storeHealth is whether the pool's store answers, so that a worker refreshes alone while it
// does not and says so once per outage. Guarded by Auth.mu.
type storeHealth struct {
	down     bool
	since    time.Time // when the outage began
	failedAt time.Time // the latest failed call
}

// storeFailed records a failed store call; the first of an outage is logged.
func (a *Auth) storeFailed(err error) {
	if a.ctx.Err() != nil {
		return // Close cut the call short: not the store's fault
	}
	a.mu.Lock()
	h := &a.share.health
	first := !h.down
	h.down, h.failedAt = true, time.Now()
	if first {
		h.since = h.failedAt
		a.st.StoreOutages++
	}
	a.mu.Unlock()
	if first {
		a.log.Warn("codex: the pool's credential store does not answer; this worker refreshes the login on its own until it is back",
			"error", err)
	}
}

// storeUp records a store call that succeeded; the first after an outage is logged.
func (a *Auth) storeUp() {
	a.mu.Lock()
	h := &a.share.health
	was, since := h.down, h.since
	h.down = false
	a.mu.Unlock()
	if was {
		a.log.Info("codex: the pool's credential store answers again; the login is shared again",
			"outage", time.Since(since).Round(time.Millisecond))
	}
}

// skipStore reports whether the store failed less than storeRetry ago.
func (a *Auth) skipStore() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.share.health.down && time.Since(a.share.health.failedAt) < storeRetry
}
