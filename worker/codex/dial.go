package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/internal/egress"
	"github.com/codexpool/codexpool/internal/origintext"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex/login"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"go.opentelemetry.io/otel/attribute"
)

// maxFrame bounds one upstream frame (a response.completed carries the whole output).
const maxFrame = 64 << 20

func http1Date(s string) (time.Time, error) { return http.ParseTime(s) }

// newDialer returns the upgrade dialer; proxyURL (already validated) routes it through a proxy.
func newDialer(proxyURL string) *websocket.Dialer {
	d := &websocket.Dialer{
		Proxy: http.ProxyFromEnvironment,
		// Idle pooled sockets should not each pin a write buffer.
		WriteBufferPool: &sync.Pool{},
	}
	if u, err := egress.Parse("proxy_url", proxyURL); err == nil {
		d.Proxy, d.NetDialContext = nil, egress.Dialer(u)
	}
	return d
}

// header returns the request headers of a new socket (or HTTP stream) with id, authenticated
// with creds; beta is the OpenAI-Beta value of the transport.
func (c *Client) header(id string, creds login.Credentials, beta string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+creds.Token)
	if creds.AccountID != "" {
		h.Set("ChatGPT-Account-Id", creds.AccountID)
	}
	h.Set("OpenAI-Beta", beta)
	h.Set("originator", Originator)
	h.Set("User-Agent", Originator+"/"+c.cfg.Version)
	h.Set("version", c.cfg.Version)
	h.Set("session-id", id)
	h.Set("thread-id", id)
	h.Set("x-client-request-id", id)
	return h
}

// connect opens a new socket through the gate's connect policy. A 401 is retried once, through
// the gate again, with the credentials the login.TokenSource gives after it.
func (c *Client) connect(ctx context.Context, res *Result) (*conn, error) {
	creds, err := c.src.Credentials()
	if err != nil {
		return nil, err
	}
	for retried := false; ; retried = true {
		cn, gres, err := gate.Connect(ctx, c.cfg.Gate, c.cfg.Policy, func(actx context.Context) (*conn, error) {
			return c.dialOnce(actx, creds)
		})
		res.Attempts += gres.Attempts
		res.GateWait += gres.Waited
		if err == nil {
			return cn, nil
		}
		if !retried && isUnauthorized(err) && ctx.Err() == nil {
			next, uerr := c.src.Unauthorized(ctx, creds)
			if uerr == nil {
				creds = next
				continue
			}
			return nil, betterUnauthorized(err, uerr)
		}
		// The gate retried 403s until the deadline and handed back the last one: that, not
		// "deadline exceeded", is why the request failed.
		var fb *forbiddenError
		if errors.As(err, &fb) && !errors.Is(ctx.Err(), context.Canceled) {
			return nil, err
		}
		if errors.Is(err, gate.ErrClosed) {
			// A closed origin (every upgrade refused, none accepted) answered before this
			// request made an attempt of its own.
			return nil, &forbiddenError{err: schemas.Errorf(schemas.CodeOriginForbidden,
				"codex: the origin refuses every upgrade (HTTP 403) and accepted none; it is probed until it opens again")}
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		// The attempt's context shares the caller's deadline but has its own timer, which may
		// fire first: that is the caller's deadline, not a connect timeout.
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			return nil, context.DeadlineExceeded
		}
		return nil, err
	}
}

// isUnauthorized reports whether err is the origin's 401.
func isUnauthorized(err error) bool {
	e, ok := schemas.AsError(err)
	return ok && e.Code == schemas.CodeUpstreamUnauthorized
}

// betterUnauthorized picks what to return when a 401 could not be cured: the login.TokenSource's own
// error when it says more (out of service: log in again) or the context ended, else the
// origin's 401.
func betterUnauthorized(origin, fromSource error) error {
	if errors.Is(fromSource, context.Canceled) || errors.Is(fromSource, context.DeadlineExceeded) {
		return fromSource
	}
	if e, ok := schemas.AsError(fromSource); ok && e.UpstreamCode != "" {
		return fromSource
	}
	return origin
}

// dialOnce is one upgrade attempt with creds; ctx carries the per-attempt timeout.
func (c *Client) dialOnce(ctx context.Context, creds login.Credentials) (cn *conn, err error) {
	c.dials.Add(1)
	id := uuid.NewString()
	ctx, span := startSpan(ctx, "upgrade", attribute.String("codexpool.socket", id))
	defer func() { endSpan(span, err) }()
	red := origintext.NewRedactor(creds.Token, creds.AccountID)
	ws, resp, err := c.dialer.DialContext(ctx, c.cfg.URL, c.header(id, creds, BetaHeader))
	if err != nil {
		if resp != nil {
			err = c.classifyStatus(resp, red, true)
			switch err.(type) {
			case *forbiddenError:
				c.forbidden.Add(1)
			case *upgradeRequiredError:
			default:
				if isUnauthorized(err) {
					c.unauthorized.Add(1)
				}
			}
		} else {
			err = c.classifyDialError(ctx, err, red)
		}
		c.log.Debug("codex: upgrade failed", "socket", id, "err", err)
		return nil, err
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	c.reportHeaderLimits(resp)
	c.upgrades.Add(1)
	if c.httpUntil.Load() != 0 && c.httpUntil.Swap(0) != 0 {
		c.log.Info("codex: the origin accepts WebSockets again; HTTP streaming ends")
	}
	ws.SetReadLimit(maxFrame)
	c.log.Debug("codex: socket opened", "socket", id)
	return c.newConn(ws, id, red), nil
}

// classifyDialError maps a failure without an HTTP response: the proxy's failure → proxyError,
// timeout → 504, anything else → 502.
func (c *Client) classifyDialError(ctx context.Context, err error, red origintext.Redactor) error {
	if pe := asProxyError(err, red); pe != nil {
		return pe
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
		return schemas.Errorf(schemas.CodeUpstreamTimeout, "codex: connect to origin timed out")
	}
	return upstreamError("connect to origin: %s", red.Clean(err.Error()))
}

// upgradeRequiredError is a 426 on the upgrade: the origin does not speak WebSockets here. It
// unwraps to the 502 returned when HTTP streaming is not an option either.
type upgradeRequiredError struct{ err *schemas.Error }

func (e *upgradeRequiredError) Error() string { return e.err.Error() }
func (e *upgradeRequiredError) Unwrap() error { return e.err }

// classifyStatus maps a refused upgrade (or, upgrade false, HTTP streaming request) from its HTTP
// status, never from error strings. The origin's message is redacted with red.
func (c *Client) classifyStatus(resp *http.Response, red origintext.Redactor, upgrade bool) error {
	what := "the HTTP request"
	if upgrade {
		what = "the upgrade"
	}
	var body []byte
	if resp.Body != nil {
		// gorilla keeps at most 1 KiB of the body.
		body, _ = io.ReadAll(io.LimitReader(resp.Body, origintext.MaxText))
		_ = resp.Body.Close()
	}
	msg := red.Clean(bodyMessage(body))
	retryAfter := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	status := resp.StatusCode
	suffix := ""
	if msg != "" {
		suffix = ": " + msg
	}
	switch {
	case status == http.StatusForbidden:
		e := &schemas.Error{Status: 403, Code: schemas.CodeOriginForbidden, RetryAfter: retryAfter,
			Message: "codex: origin rejected " + what + " (HTTP 403)" + suffix}
		if !upgrade {
			return e // nothing for the upgrade gate to pace
		}
		return &forbiddenError{err: e}
	case status == http.StatusUnauthorized:
		return schemas.Errorf(schemas.CodeUpstreamUnauthorized, "codex: origin refused the credentials (HTTP 401)%s", suffix)
	case status == http.StatusTooManyRequests:
		e := schemas.Errorf(schemas.CodeUpstreamRateLimited, "codex: origin rate limit (HTTP 429)%s", suffix)
		e.RetryAfter = retryAfter
		return e
	case status == http.StatusUpgradeRequired && upgrade:
		return &upgradeRequiredError{upstreamError("origin refused WebSockets (HTTP 426)%s", suffix)}
	case status >= 500:
		return upstreamError("origin failed %s (HTTP %d)%s", what, status, suffix)
	default:
		return upstreamError("origin answered %s with HTTP %d%s", what, status, suffix)
	}
}

// bodyMessage returns the message of an origin error body: error.message, error (a string),
// message or detail of a JSON object, else the body text.
func bodyMessage(body []byte) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) == nil {
		if m := origintext.Str(origintext.Detail(obj["error"]).Message); m != "" {
			return m
		}
		for _, k := range []string{"message", "detail"} {
			if m := origintext.Str(obj[k]); m != "" {
				return m
			}
		}
	}
	return strings.TrimSpace(string(body))
}

// readErrorMessage describes why the socket's reader ended, for a 502.
func (cn *conn) readErrorMessage() string {
	err := cn.readErr
	var ce *websocket.CloseError
	switch {
	case errors.As(err, &ce):
		text := cn.redact.Clean(ce.Text)
		if text != "" {
			return fmt.Sprintf("origin closed the socket (%d: %s) before a terminal event", ce.Code, text)
		}
		return fmt.Sprintf("origin closed the socket (%d) before a terminal event", ce.Code)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "socket ended before a terminal event"
	case errors.Is(err, websocket.ErrReadLimit):
		return "event larger than the read limit"
	default:
		return "socket failed before a terminal event: " + cn.redact.Clean(err.Error())
	}
}
