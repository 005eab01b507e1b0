package worker

import (
	"context"
	"sync"
	"time"

	"github.com/codexpool/codexpool/schemas"
)

// Slots counts each account's generations across the pool, for Account.MaxConcurrent
// (Options.Slots): queue.LeaseStore keeps them as leases in a JetStream key-value bucket that
// expire unless their holder renews them, so the slots of a worker that died come back on their
// own. Implementations are safe for concurrent use.
type Slots interface {
	// Acquire takes one of max slots of account (an AccountIdentity) for one generation. ok is
	// false, with a nil error, when all are held. release gives the slot back; until it is
	// called the implementation keeps the slot alive.
	Acquire(ctx context.Context, account string, max int) (release func(), ok bool, err error)
}

// slotRetry is how long an account whose slots were all held elsewhere stays out of routing
// before a generation tries to lease one again.
const slotRetry = 50 * time.Millisecond

// leaseTimeout bounds one Acquire: a slow store must not hold a generation.
const leaseTimeout = 2 * time.Second

// lease takes a slot of a for the generation when a has a MaxConcurrent. ok is false when every
// slot is held elsewhere: a stays out of routing for slotRetry and the generation waits. A store
// that fails lets the generation run (logged): the limit is then only this worker's.
func (g *generation) lease(ctx context.Context, a *account) bool {
	if a.maxConcurrent <= 0 {
		return true
	}
	lctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	release, ok, err := g.w.slots.Acquire(lctx, a.identity, a.maxConcurrent)
	cancel()
	switch {
	case err != nil:
		g.w.log.Warn("account slots: cannot lease; running on this worker's count alone",
			"request_id", g.req.ID, "account", a.name, "error", err)
		ok, release = true, func() {}
	case !ok:
		g.w.router.slotsFull(a, time.Now())
		return false
	}
	g.w.router.leased(a, 1)
	g.unlease = func() {
		release()
		g.w.router.leased(a, -1)
	}
	return true
}

// busy is the answer of a generation that waited Config.AccountQueueTimeout for an account to
// take it (their slots held, or their gates full).
func (g *generation) busy() error {
	return errBusy("worker: every account the request may use is at its max_concurrent; waited " +
		g.w.cfg.AccountQueueTimeout.String())
}

// errBusy is a 429 worker_busy answer: this worker is full for now, retry after 1 s.
func errBusy(msg string) *schemas.Error {
	return &schemas.Error{Status: 429, Code: schemas.CodeWorkerBusy, RetryAfter: time.Second, Message: msg}
}

// queuedTooLong reports whether the generation has waited for an account longer than
// Config.AccountQueueTimeout at now.
func (g *generation) queuedTooLong(now time.Time) bool {
	return !g.queued.IsZero() && now.Sub(g.queued) >= g.w.cfg.AccountQueueTimeout
}

// memSlots are the Slots of a worker without a shared store: this process's generations only.
type memSlots struct {
	mu   sync.Mutex
	held map[string]int
}

func (m *memSlots) Acquire(_ context.Context, account string, max int) (func(), bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		m.held = map[string]int{}
	}
	if m.held[account] >= max {
		return nil, false, nil
	}
	m.held[account]++
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.held[account]--
			m.mu.Unlock()
		})
	}, true, nil
}
