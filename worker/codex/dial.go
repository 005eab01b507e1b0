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
	"github.com/codexpool/codexpool/schemas"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"
)

// maxFrame bounds one upstream frame (a response.completed carries the whole output).
const maxFrame = 64 << 20

func http1Date(s string) (time.Time, error) { return http.ParseTime(s) }

func newDialer() *websocket.Dialer {
	return &websocket.Dialer{
		Proxy: http.ProxyFromEnvironment,
		// Idle pooled sockets should not each pin a write buffer.
		WriteBufferPool: &sync.Pool{},
	}
}

// header returns the upgrade request headers for a new socket with id.
func (c *Client) header(id string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.cfg.Token)
	if c.cfg.AccountID != "" {
		h.Set("ChatGPT-Account-Id", c.cfg.AccountID)
	}
	h.Set("OpenAI-Beta", BetaHeader)
	h.Set("originator", Originator)
	h.Set("User-Agent", Originator+"/"+c.cfg.Version)
	h.Set("version", c.cfg.Version)
	h.Set("session-id", id)
	h.Set("thread-id", id)
	h.Set("x-client-request-id", id)
	return h
}

// connect opens a new socket through the gate's connect policy.
func (c *Client) connect(ctx context.Context, res *Result) (*conn, error) {
	cn, gres, err := gate.Connect(ctx, c.cfg.Gate, c.cfg.Policy, c.dialOnce)
	res.Attempts += gres.Attempts
	res.GateWait += gres.Waited
	if err != nil {
		// The gate retried 403s until the deadline and handed back the last one: that, not
		// "deadline exceeded", is why the request failed.
		var fb *forbiddenError
		if errors.As(err, &fb) && !errors.Is(ctx.Err(), context.Canceled) {
			return nil, err
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
	return cn, nil
}

// dialOnce is one upgrade attempt; ctx carries the per-attempt timeout.
func (c *Client) dialOnce(ctx context.Context) (*conn, error) {
	c.dials.Add(1)
	id := uuid.NewString()
	ws, resp, err := c.dialer.DialContext(ctx, c.cfg.URL, c.header(id))
	if err != nil {
		if resp != nil {
			err = c.classifyHandshake(resp)
			if _, ok := err.(*forbiddenError); ok {
				c.forbidden.Add(1)
			}
		} else {
			err = c.classifyDialError(ctx, err)
		}
		c.log.Debug("codex: upgrade failed", "socket", id, "err", err)
		return nil, err
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	c.reportHeaderLimits(resp)
	c.upgrades.Add(1)
	ws.SetReadLimit(maxFrame)
	c.log.Debug("codex: socket opened", "socket", id)
	return c.newConn(ws, id), nil
}

// classifyDialError maps a failure without an HTTP response: timeout → 504, anything else → 502.
func (c *Client) classifyDialError(ctx context.Context, err error) error {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
		return schemas.Errorf(schemas.CodeUpstreamTimeout, "codex: connect to origin timed out")
	}
	return upstreamError("connect to origin: %s", c.redact.clean(err.Error()))
}

// classifyHandshake maps a refused upgrade from its HTTP status (never from error strings).
func (c *Client) classifyHandshake(resp *http.Response) error {
	var body []byte
	if resp.Body != nil {
		// gorilla keeps at most 1 KiB of the body.
		body, _ = io.ReadAll(io.LimitReader(resp.Body, maxOriginText))
		_ = resp.Body.Close()
	}
	msg := c.redact.clean(bodyMessage(body))
	retryAfter := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	status := resp.StatusCode
	suffix := ""
	if msg != "" {
		suffix = ": " + msg
	}
	switch {
	case status == http.StatusForbidden:
		e := &schemas.Error{Status: 403, Code: schemas.CodeOriginForbidden, RetryAfter: retryAfter,
			Message: "codex: origin rejected the upgrade (HTTP 403)" + suffix}
		return &forbiddenError{err: e}
	case status == http.StatusUnauthorized:
		return schemas.Errorf(schemas.CodeUpstreamUnauthorized, "codex: origin refused the credentials (HTTP 401)%s", suffix)
	case status == http.StatusTooManyRequests:
		e := schemas.Errorf(schemas.CodeUpstreamRateLimited, "codex: origin rate limit (HTTP 429)%s", suffix)
		e.RetryAfter = retryAfter
		return e
	case status == http.StatusUpgradeRequired:
		return upstreamError("origin refused WebSockets (HTTP 426)%s", suffix)
	case status >= 500:
		return upstreamError("origin failed the upgrade (HTTP %d)%s", status, suffix)
	default:
		return upstreamError("origin answered the upgrade with HTTP %d%s", status, suffix)
	}
}

// bodyMessage returns the message of an origin error body: error.message, error (a string),
// message or detail of a JSON object, else the body text.
func bodyMessage(body []byte) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) == nil {
		if m := str(detail(obj["error"]).Message); m != "" {
			return m
		}
		for _, k := range []string{"message", "detail"} {
			if m := str(obj[k]); m != "" {
				return m
			}
		}
	}
	return strings.TrimSpace(string(body))
}

// readErrorMessage describes why a socket's reader ended, for a 502.
func (c *Client) readErrorMessage(err error) string {
	var ce *websocket.CloseError
	switch {
	case errors.As(err, &ce):
		text := c.redact.clean(ce.Text)
		if text != "" {
			return fmt.Sprintf("origin closed the socket (%d: %s) before a terminal event", ce.Code, text)
		}
		return fmt.Sprintf("origin closed the socket (%d) before a terminal event", ce.Code)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "socket ended before a terminal event"
	case errors.Is(err, websocket.ErrReadLimit):
		return "event larger than the read limit"
	default:
		return "socket failed before a terminal event: " + c.redact.clean(err.Error())
	}
}
