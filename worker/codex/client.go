package codex

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/codexpool/codexpool/schemas"
)

// Client runs generations over Codex WebSockets and pools the sockets. Create it with New.
// Safe for concurrent use.
type Client struct {
	cfg    Config
	log    *slog.Logger
	dialer *websocket.Dialer
	redact redactor

	mu     sync.Mutex
	idle   []*conn // idle pooled sockets, least recently used first
	closed bool

	stop chan struct{}  // closed by Close: stops the janitor
	wg   sync.WaitGroup // the janitor, every generation, every socket reader

	dials, upgrades, forbidden     atomic.Int64
	generations, completed, reused atomic.Int64
	retries, discarded, expired    atomic.Int64
	open                           atomic.Int64
}

// Result is the outcome of a completed generation.
type Result struct {
	// Response is the "response" object of response.completed, as received.
	Response json.RawMessage
	// Events counts the events handed to onEvent (codex.rate_limits excluded).
	Events int
	// Reused is true when the generation ran on a pooled socket.
	Reused bool
	// Retried is true when a pooled socket failed before the first event and the generation was
	// run again on a fresh socket.
	Retried bool
	// Attempts counts the upgrade attempts made (0 on a pooled socket).
	Attempts int
	// GateWait is the time spent waiting in the gate and the 403 cooldown.
	GateWait time.Duration
}

// Stats are a Client's counters, for logs and metrics.
type Stats struct {
	Dials       int64 `json:"dials"`       // upgrade attempts
	Upgrades    int64 `json:"upgrades"`    // successful upgrades
	Forbidden   int64 `json:"forbidden"`   // upgrades rejected with 403
	Generations int64 `json:"generations"` // Generate calls
	Completed   int64 `json:"completed"`   // generations that ended with response.completed
	Reused      int64 `json:"reused"`      // generations run on a pooled socket
	Retries     int64 `json:"retries"`     // pooled sockets that failed before the first event and were retried
	Discarded   int64 `json:"discarded"`   // idle sockets found closed or unhealthy
	Expired     int64 `json:"expired"`     // idle sockets closed for idle expiry or age
	Idle        int   `json:"idle"`        // idle pooled sockets now
	Open        int64 `json:"open"`        // open sockets now (idle and in use)
}

// New returns a Client for cfg. cfg.Token is required.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:    cfg,
		log:    cfg.Logger,
		dialer: newDialer(),
		redact: newRedactor(cfg.Token, cfg.AccountID),
		stop:   make(chan struct{}),
	}
	if !cfg.NoReuse {
		c.wg.Add(1)
		go c.janitor()
	}
	return c, nil
}

// Stats returns the current counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	idle := len(c.idle)
	c.mu.Unlock()
	return Stats{
		Dials: c.dials.Load(), Upgrades: c.upgrades.Load(), Forbidden: c.forbidden.Load(),
		Generations: c.generations.Load(), Completed: c.completed.Load(), Reused: c.reused.Load(),
		Retries: c.retries.Load(), Discarded: c.discarded.Load(), Expired: c.expired.Load(),
		Idle: idle, Open: c.open.Load(),
	}
}

// Close closes the idle sockets and stops the background goroutines. Generations in flight finish
// (or fail) and close their sockets; Close waits for them, so cancel their contexts to hurry it.
// Generate after Close returns ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.wg.Wait()
		return nil
	}
	c.closed = true
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	close(c.stop)
	for _, cn := range idle {
		if cn.state.CompareAndSwap(stateIdle, stateDead) {
			cn.close(true)
		}
	}
	c.wg.Wait()
	return nil
}

// Generate runs one generation: frame is the complete response.create JSON. It sends frame on a
// pooled socket (or a new one opened through the gate), then reads events until a terminal one,
// calling onEvent (if not nil) for every event except codex.rate_limits, the terminal event
// included — also a failure. An error from onEvent ends the generation and is returned as it is.
//
// On response.completed it returns the Result and pools the socket. Otherwise the socket is closed
// and the error is a *schemas.Error (see the package doc), or ctx.Err() unwrapped when ctx is done;
// once the generation has started, the Result comes back with the error too (its Response is nil),
// so callers can log the attempts, the gate wait and whether a pooled socket was used.
func (c *Client) Generate(ctx context.Context, frame []byte, onEvent func(Event) error) (*Result, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, closedError()
	}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	c.generations.Add(1)

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &Result{}
	if !c.cfg.NoReuse {
		if cn := c.lease(); cn != nil {
			res.Reused = true
			c.reused.Add(1)
			retry, err := c.run(ctx, cn, frame, onEvent, true, res)
			if !retry {
				return c.done(res, err)
			}
			c.retries.Add(1)
			c.log.Debug("codex: pooled socket failed before the first event; retrying on a new socket",
				"socket", cn.id, "err", err)
			res.Reused, res.Retried = false, true
		}
	}
	cn, err := c.connect(ctx, res)
	if err != nil {
		return res, err
	}
	_, err = c.run(ctx, cn, frame, onEvent, false, res)
	return c.done(res, err)
}

func (c *Client) done(res *Result, err error) (*Result, error) {
	if err != nil {
		res.Response = nil
		return res, err
	}
	c.completed.Add(1)
	return res, nil
}

// run sends frame on cn and reads events until a terminal one. pooled marks a socket leased from
// the pool: if it fails before any event of this request, retry is true and err says why.
// cn is released on success and closed on every other end.
func (c *Client) run(ctx context.Context, cn *conn, frame []byte, onEvent func(Event) error, pooled bool, res *Result) (retry bool, err error) {
	// A cancelled context ends a blocked write by closing the socket.
	stop := context.AfterFunc(ctx, func() { cn.close(false) })
	_ = cn.ws.SetWriteDeadline(time.Now().Add(c.cfg.IdleTimeout))
	werr := cn.ws.WriteMessage(websocket.TextMessage, frame)
	if !stop() {
		cn.close(false)
		return false, ctx.Err()
	}
	if werr != nil {
		cn.close(false)
		if err := ctx.Err(); err != nil {
			return false, err
		}
		return pooled, upstreamError("send request: %s", c.redact.clean(werr.Error()))
	}

	timer := time.NewTimer(c.cfg.IdleTimeout)
	defer timer.Stop()
	events := 0
	for {
		var f message
		var ok bool
		select {
		case <-ctx.Done():
			cn.close(false)
			return false, ctx.Err()
		case <-timer.C:
			cn.close(false)
			if events == 0 {
				return false, schemas.Errorf(schemas.CodeUpstreamTimeout, "codex: no first event within %s", c.cfg.IdleTimeout)
			}
			return false, schemas.Errorf(schemas.CodeUpstreamTimeout, "codex: no event for %s", c.cfg.IdleTimeout)
		case f, ok = <-cn.frames:
		}
		if !ok {
			cn.close(false)
			if err := ctx.Err(); err != nil {
				return false, err
			}
			return pooled && events == 0, upstreamError("%s", c.readErrorMessage(cn.readErr))
		}
		timer.Reset(c.cfg.IdleTimeout)
		if f.typ != websocket.TextMessage {
			cn.close(false)
			return false, upstreamError("origin sent a binary frame")
		}
		typ, jerr := eventType(f.data)
		if jerr != nil {
			cn.close(false)
			return false, upstreamError("origin sent an event that is not a JSON object")
		}
		if typ == typeRateLimits {
			c.reportEventLimits(f.data)
			continue
		}
		// Events are passed on as received, except that an origin echoing our credentials (in an
		// error event, response.failed, ...) must not hand them to the client.
		f.data = c.redact.cleanFrame(f.data)
		if pooled && events == 0 && typ == typeError && connLimitEvent(f.data) {
			cn.close(false)
			return true, upstreamError("pooled socket reached its connection limit")
		}
		events++
		res.Events = events
		if onEvent != nil {
			if err := onEvent(Event{Type: typ, Data: f.data}); err != nil {
				cn.close(false)
				return false, err
			}
		}
		switch typ {
		case typeCompleted:
			resp, ok := schemas.CompletedResponse(f.data)
			if !ok {
				cn.close(false)
				return false, upstreamError("bad response.completed event: no response object")
			}
			res.Response = resp
			c.release(cn)
			return false, nil
		case typeFailed:
			cn.close(false)
			return false, mapFailed(f.data, c.redact)
		case typeIncomplete:
			cn.close(false)
			return false, mapIncomplete(f.data, c.redact)
		case typeError:
			cn.close(false)
			return false, mapErrorEvent(f.data, c.redact, time.Now())
		}
	}
}
