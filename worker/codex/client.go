package codex

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codexpool/codexpool/internal/origintext"
	"github.com/gorilla/websocket"
	"go.opentelemetry.io/otel/attribute"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex/login"
)

// Client runs generations over Codex WebSockets and pools the sockets. Create it with New.
// Safe for concurrent use.
type Client struct {
	cfg     Config
	log     *slog.Logger
	dialer  *websocket.Dialer
	src     login.TokenSource
	httpURL string
	httpTr  *http.Transport
	httpc   *http.Client
	// httpUntil (unix ns) is when the client tries WebSockets again after a 426; 0 = on them.
	httpUntil atomic.Int64

	mu     sync.Mutex
	idle   []*conn            // idle pooled sockets, least recently used first
	pinned map[*conn]struct{} // sockets reserved by a Pin between its generations
	pinged time.Time          // when sweep last pinged the idle and pinned sockets
	closed bool

	stop chan struct{}  // closed by Close: stops the janitor
	wg   sync.WaitGroup // the janitor, every generation, every socket reader

	dials, upgrades, forbidden     atomic.Int64
	generations, completed, reused atomic.Int64
	retries, discarded, expired    atomic.Int64
	open                           atomic.Int64
	httpResponses, fallbacks       atomic.Int64
	unauthorized                   atomic.Int64
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
	// HTTP is true when the generation ran over HTTP streaming (the origin refused WebSockets).
	HTTP bool
}

// fixedSource is the login.TokenSource of a fixed Config.Token: a 401 is final.
type fixedSource struct{ c login.Credentials }

func (f fixedSource) Credentials() (login.Credentials, error) { return f.c, nil }
func (f fixedSource) Unauthorized(context.Context, login.Credentials) (login.Credentials, error) {
	return login.Credentials{}, errFixedToken
}

// errFixedToken: a fixed token cannot be replaced; the origin's 401 stands as it is.
var errFixedToken = errors.New("codex: fixed token")

// New returns a Client for cfg. cfg.Credentials or cfg.Token is required.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:     cfg,
		log:     cfg.Logger,
		dialer:  newDialer(cfg.ProxyURL),
		src:     cfg.Credentials,
		httpURL: httpURL(cfg.URL),
		stop:    make(chan struct{}),
		pinned:  map[*conn]struct{}{},
	}
	if c.src == nil {
		c.src = fixedSource{login.Credentials{Token: cfg.Token, AccountID: cfg.AccountID, Source: "config"}}
	}
	c.httpTr, c.httpc = newHTTPClient(cfg)
	if !cfg.NoReuse {
		c.wg.Add(1)
		go c.janitor()
	}
	return c, nil
}

// Stats returns the current counters.
func (c *Client) Stats() schemas.UpstreamStats {
	c.mu.Lock()
	idle, pinned := len(c.idle), len(c.pinned)
	c.mu.Unlock()
	st := schemas.UpstreamStats{
		Dials: c.dials.Load(), Upgrades: c.upgrades.Load(), Forbidden: c.forbidden.Load(),
		Generations: c.generations.Load(), Completed: c.completed.Load(), Reused: c.reused.Load(),
		Retries: c.retries.Load(), Discarded: c.discarded.Load(), Expired: c.expired.Load(),
		Idle: idle, Pinned: pinned, Open: c.open.Load(), Transport: "ws",
		HTTPResponses: c.httpResponses.Load(), HTTPFallbacks: c.fallbacks.Load(),
		Unauthorized: c.unauthorized.Load(),
	}
	if c.onHTTP(time.Now()) {
		st.Transport = "http"
	}
	if s, ok := c.src.(interface {
		Stats() schemas.CredentialStats
	}); ok {
		as := s.Stats()
		st.Credentials = &as
	}
	return st
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
	for cn := range c.pinned {
		if cn.state.CompareAndSwap(statePinned, stateIdle) { // closed below like the idle ones
			idle = append(idle, cn)
		}
	}
	clear(c.pinned)
	c.mu.Unlock()
	close(c.stop)
	for _, cn := range idle {
		if cn.state.CompareAndSwap(stateIdle, stateDead) {
			cn.close(true)
		}
	}
	c.wg.Wait()
	c.httpTr.CloseIdleConnections()
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
//
// When the origin refuses WebSockets (426 on the upgrade) the generation runs over HTTP
// streaming instead, with the same onEvent calls and errors, and so do new generations for
// Config.WSRetryAfter; pooled sockets are still used while they last. A 401 is retried once with
// the credentials the login.TokenSource gives after it (a re-read or refreshed login).
func (c *Client) Generate(ctx context.Context, frame []byte, onEvent func(Event) error) (*Result, error) {
	return c.generate(ctx, frame, onEvent, nil)
}

// enter counts a generation in c.wg; false after Close.
func (c *Client) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// generate is Generate; with pin, the socket that completes the response stays with pin.
func (c *Client) generate(ctx context.Context, frame []byte, onEvent func(Event) error, pin *Pin) (*Result, error) {
	if !c.enter() {
		return nil, closedError()
	}
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
			reuseSpan(ctx, cn.id)
			cn.pin = pin
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
	if c.onHTTP(time.Now()) {
		return c.done(res, c.streamHTTP(ctx, frame, onEvent, res))
	}
	cn, err := c.connect(ctx, res)
	var ur *upgradeRequiredError
	if errors.As(err, &ur) {
		c.fallBack()
		return c.done(res, c.streamHTTP(ctx, frame, onEvent, res))
	}
	if err != nil {
		return res, err
	}
	cn.pin = pin
	_, err = c.run(ctx, cn, frame, onEvent, false, res)
	return c.done(res, err)
}

// streamHTTP is generateHTTP in its span.
func (c *Client) streamHTTP(ctx context.Context, frame []byte, onEvent func(Event) error, res *Result) error {
	ctx, span := startSpan(ctx, "http stream")
	_, first := startSpan(ctx, "first event")
	err := c.generateHTTP(ctx, frame, firstEvent(first, onEvent), res)
	first.End()
	endSpan(span, err)
	return err
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
	ctx, span := startSpan(ctx, "turn", attribute.String("codexpool.socket", cn.id), attribute.Bool("codexpool.socket.reused", pooled))
	_, first := startSpan(ctx, "first event")
	defer func() {
		first.End()
		span.SetAttributes(attribute.Int("codexpool.events", res.Events), attribute.Bool("codexpool.retry", retry))
		endSpan(span, err)
	}()
	return c.turn(ctx, cn, frame, firstEvent(first, onEvent), pooled, res)
}

// turn is run's send and read loop.
func (c *Client) turn(ctx context.Context, cn *conn, frame []byte, onEvent func(Event) error, pooled bool, res *Result) (retry bool, err error) {
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
		return pooled, upstreamError("send request: %s", cn.redact.Clean(werr.Error()))
	}

	timer := time.NewTimer(c.cfg.IdleTimeout)
	defer timer.Stop()
	for {
		var f message
		var ok bool
		select {
		case <-ctx.Done():
			cn.close(false)
			return false, ctx.Err()
		case <-timer.C:
			cn.close(false)
			return false, c.idleError(res.Events)
		case f, ok = <-cn.frames:
		}
		if !ok {
			cn.close(false)
			if err := ctx.Err(); err != nil {
				return false, err
			}
			return pooled && res.Events == 0, upstreamError("%s", cn.readErrorMessage())
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
		typ, f.data = redactEvent(cn.redact, typ, f.data)
		if pooled && res.Events == 0 && typ == typeError && connLimitEvent(f.data) {
			cn.close(false)
			return true, upstreamError("pooled socket reached its connection limit")
		}
		done, err := c.deliver(typ, f.data, cn.redact, res, onEvent)
		if !done {
			continue
		}
		if err == nil {
			c.release(cn)
		} else {
			cn.close(false)
		}
		return false, err
	}
}

// redactEvent returns data with the credentials redacted and, when that changed it, its type
// read again: an echoed secret can sit in the type too (FuzzSSE found one).
func redactEvent(red origintext.Redactor, typ string, data []byte) (string, []byte) {
	clean := red.CleanFrame(data)
	if len(clean) != len(data) || (len(clean) > 0 && &clean[0] != &data[0]) {
		if t, err := eventType(clean); err == nil {
			typ = t
		}
	}
	return typ, clean
}

// idleError is the 504 of a generation that waited IdleTimeout for an event.
func (c *Client) idleError(events int) error {
	if events == 0 {
		return schemas.Errorf(schemas.CodeUpstreamTimeout, "codex: no first event within %s", c.cfg.IdleTimeout)
	}
	return schemas.Errorf(schemas.CodeUpstreamTimeout, "codex: no event for %s", c.cfg.IdleTimeout)
}

// deliver hands one event (typed and redacted; not codex.rate_limits) to onEvent and maps the
// terminal ones, on either transport. done reports that the generation ended: with a nil error
// at response.completed (res.Response is then set), else with the error.
func (c *Client) deliver(typ string, data []byte, red origintext.Redactor, res *Result, onEvent func(Event) error) (done bool, err error) {
	res.Events++
	if onEvent != nil {
		if err := onEvent(Event{Type: typ, Data: data}); err != nil {
			return true, err
		}
	}
	switch typ {
	case typeCompleted:
		resp, ok := schemas.CompletedResponse(data)
		if !ok {
			return true, upstreamError("bad response.completed event: no response object")
		}
		res.Response = resp
		return true, nil
	case typeFailed:
		return true, mapFailed(data, red)
	case typeIncomplete:
		return true, mapIncomplete(data, red)
	case typeError:
		return true, mapErrorEvent(data, red, time.Now())
	}
	return false, nil
}
