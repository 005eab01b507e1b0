package codex

import (
	"context"
	"errors"
	"sync"
)

// ErrPinLost is what Pin.Generate returns, at once and without upstream traffic, for a
// continuation when the pin has no socket: its socket ended (or the pin never had one), so the
// origin's connection-local state the continuation needs is gone.
var ErrPinLost = errors.New("codex: the session's socket is gone")

// statePinned is the state of a socket a Pin holds between its generations: its reader closes it
// when the origin ends it.
const statePinned = stateDead + 1

// A Pin reserves one upstream socket for a session: the generations run through it use the
// same socket, one at a time, so the origin's connection-local state (previous_response_id) is
// there for the next one. The socket is not returned to the pool until Release. Make one with
// Client.Pin; safe for concurrent use (generations on one Pin run one after another).
type Pin struct {
	c *Client

	mu       sync.Mutex // held for a whole generation
	cn       *conn      // the reserved socket between generations; nil before the first, or once lost
	released bool
}

// Pin returns a new Pin on c. It holds no socket until its first Generate.
func (c *Client) Pin() *Pin { return &Pin{c: c} }

// Generate runs frame as Client.Generate does, on the pin's socket. The first generation (or
// one after the socket was lost) takes a pooled socket or opens one; after response.completed
// the socket stays with the pin. continuation marks a frame that continues an earlier response
// (previous_response_id): without the pin's socket it fails at once with ErrPinLost, and a
// failure on the socket is never retried elsewhere.
func (p *Pin) Generate(ctx context.Context, frame []byte, continuation bool, onEvent func(Event) error) (*Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return nil, ErrPinLost
	}
	cn := p.take()
	if cn == nil && continuation {
		return nil, ErrPinLost
	}
	if cn == nil {
		return p.c.generate(ctx, frame, onEvent, p)
	}
	c := p.c
	if !c.enter() {
		cn.close(true)
		return nil, closedError()
	}
	defer c.wg.Done()
	c.generations.Add(1)
	c.reused.Add(1)
	res := &Result{Reused: true}
	reuseSpan(ctx, cn.id)
	_, err := c.run(ctx, cn, frame, onEvent, false, res)
	return c.done(res, err)
}

// take removes the pin's socket from the client's pinned set for a generation; nil when there is
// none, or it ended or turned unhealthy while the session idled (it is closed then).
func (p *Pin) take() *conn {
	cn := p.cn
	p.cn = nil
	if cn == nil {
		return nil
	}
	c := p.c
	c.mu.Lock()
	_, mine := c.pinned[cn]
	delete(c.pinned, cn)
	c.mu.Unlock()
	if !mine || !cn.state.CompareAndSwap(statePinned, stateLeased) { // Close or its reader took it
		return nil
	}
	if cn.ended.Load() || !cn.drainHealthy() {
		c.discarded.Add(1)
		cn.close(false)
		return nil
	}
	return cn
}

// keep makes cn, which just completed a response for p, the pin's socket (release calls it).
func (c *Client) keep(p *Pin, cn *conn) {
	if !cn.drainHealthy() {
		c.discarded.Add(1)
		cn.close(false)
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cn.close(true)
		return
	}
	c.pinned[cn] = struct{}{}
	cn.state.Store(statePinned)
	c.mu.Unlock()
	p.cn = cn // under p.mu: keep runs inside the pin's Generate
	// The origin may have ended the socket before its reader could tell it was pinned.
	if cn.ended.Load() && cn.state.CompareAndSwap(statePinned, stateDead) {
		c.unpin(cn)
		cn.close(false)
	}
}

// unpin removes a socket that ended from the pinned set.
func (c *Client) unpin(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pinned[cn]; ok {
		delete(c.pinned, cn)
		c.discarded.Add(1)
	}
}

// Release ends the reservation: the socket goes back to the pool (or is closed), and later
// generations on the pin fail with ErrPinLost. Release waits for a generation in flight on the
// pin; it is idempotent.
func (p *Pin) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.released = true
	if cn := p.take(); cn != nil {
		cn.pin = nil
		p.c.release(cn)
	}
}

// HasSocket reports whether the pin holds a socket now (false while a generation runs on it).
func (p *Pin) HasSocket() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cn != nil
}
