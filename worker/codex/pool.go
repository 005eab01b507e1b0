package codex

import (
	"slices"
	"time"

	"github.com/gorilla/websocket"
)

// lease takes the most recently used healthy idle socket, or returns nil.
func (c *Client) lease() *conn {
	now := time.Now()
	for {
		c.mu.Lock()
		n := len(c.idle)
		if n == 0 {
			c.mu.Unlock()
			return nil
		}
		cn := c.idle[n-1]
		c.idle[n-1] = nil
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		if !cn.state.CompareAndSwap(stateIdle, stateLeased) {
			continue // its reader condemned it
		}
		if now.Sub(cn.born) >= c.cfg.MaxAge {
			c.expired.Add(1)
			cn.close(true)
			continue
		}
		if !cn.drainHealthy() {
			c.discarded.Add(1)
			cn.close(false)
			continue
		}
		return cn
	}
}

// release puts a socket that just completed a response back into the pool, or closes it.
func (c *Client) release(cn *conn) {
	if cn.pin != nil {
		c.keep(cn.pin, cn)
		return
	}
	if c.cfg.NoReuse || time.Since(cn.born) >= c.cfg.MaxAge {
		cn.close(true)
		return
	}
	if !cn.drainHealthy() {
		c.discarded.Add(1)
		cn.close(false)
		return
	}
	var evict *conn
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cn.close(true)
		return
	}
	if len(c.idle) >= c.cfg.MaxIdle {
		evict = c.idle[0]
		c.idle = slices.Delete(c.idle, 0, 1) // least recently used first
	}
	cn.idleSince = time.Now()
	cn.state.Store(stateIdle)
	c.idle = append(c.idle, cn)
	c.mu.Unlock()
	if evict != nil && evict.state.CompareAndSwap(stateIdle, stateDead) {
		evict.close(true)
	}
	// The origin may have ended the socket while it was still leased, when its reader could not
	// yet tell it was idle.
	if cn.ended.Load() && cn.state.CompareAndSwap(stateIdle, stateDead) {
		c.forget(cn)
		cn.close(false)
	}
}

// forget removes a condemned socket from the idle list.
func (c *Client) forget(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.idle {
		if x == cn {
			c.idle = slices.Delete(c.idle, i, i+1)
			c.discarded.Add(1)
			return
		}
	}
}

// sweep closes idle sockets unused for IdleExpiry or older than MaxAge, and pings the idle and
// pinned sockets every PingInterval.
func (c *Client) sweep(now time.Time) {
	var stale, quiet []*conn
	c.mu.Lock()
	keep := c.idle[:0]
	for _, cn := range c.idle {
		if now.Sub(cn.idleSince) >= c.cfg.IdleExpiry || now.Sub(cn.born) >= c.cfg.MaxAge {
			stale = append(stale, cn)
			continue
		}
		keep = append(keep, cn)
	}
	clear(c.idle[len(keep):])
	c.idle = keep
	if now.Sub(c.pinged) >= c.cfg.PingInterval {
		c.pinged = now
		quiet = append(quiet, c.idle...)
		for cn := range c.pinned {
			quiet = append(quiet, cn)
		}
	}
	c.mu.Unlock()
	for _, cn := range quiet {
		// WriteControl may run beside a generation's writes; a socket that fails it is found
		// dead by its reader (and by lease's health check).
		_ = cn.ws.WriteControl(websocket.PingMessage, nil, now.Add(time.Second))
	}
	for _, cn := range stale {
		if cn.state.CompareAndSwap(stateIdle, stateDead) {
			c.expired.Add(1)
			cn.close(true)
		}
	}
}

// janitor sweeps the pool until stop is closed.
func (c *Client) janitor() {
	defer c.wg.Done()
	every := max(min(c.cfg.IdleExpiry, c.cfg.MaxAge, c.cfg.PingInterval)/4, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-t.C:
			c.sweep(now)
		}
	}
}
