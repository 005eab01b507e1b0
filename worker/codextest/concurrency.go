package codextest

import "sync/atomic"

// concurrency counts an account's responses in flight (from their start to their end or their
// socket's) and the most seen at once: AccountStats.InFlight and MaxConcurrent. Safe for
// concurrent use; a nil *concurrency counts nothing.
type concurrency struct {
	cur, max atomic.Int64
}

func (c *concurrency) enter() {
	if c == nil {
		return
	}
	n := c.cur.Add(1)
	for {
		m := c.max.Load()
		if n <= m || c.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (c *concurrency) leave() {
	if c != nil {
		c.cur.Add(-1)
	}
}

// resetMax forgets the most seen at once (ResetStats): it becomes the number in flight now.
func (c *concurrency) resetMax() { c.max.Store(c.cur.Load()) }

// inflightOf returns the counter of acct (nil without accounts).
func inflightOf(acct *account) *concurrency {
	if acct == nil {
		return nil
	}
	return &acct.c.inflight
}
