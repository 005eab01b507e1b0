package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/codexpool/codexpool/internal/egress"
	"github.com/codexpool/codexpool/internal/origintext"
	"github.com/google/uuid"
	sse "github.com/tmaxmax/go-sse"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex/login"
)

// HTTPBetaHeader is the OpenAI-Beta value sent with HTTP streaming, as the official client and
// others do; BetaHeader names the WebSocket protocol, which an HTTP request does not speak.
const HTTPBetaHeader = "responses=experimental"

// drainWait bounds the read of what follows response.completed on an HTTP stream (its end), so
// the connection goes back to the keep-alive pool instead of being closed.
const drainWait = time.Second

// HTTP streaming is the fallback for origins that answer the upgrade with 426: the body of the
// response.create frame without "type" is POSTed to the origin's http(s) URL with the socket's
// headers and Accept: text/event-stream, and the server-sent events' data are the events a
// socket would carry. The client then stays on HTTP for Config.WSRetryAfter (the official client
// stays for its whole session; a pool runs for months, so it looks again). Keep-alive
// connections play the part of pooled sockets.

// newHTTPClient returns the HTTP streaming client. It has no overall timeout: the request's
// context, the idle timer and ResponseHeaderTimeout (the wait for the first byte) bound it.
func newHTTPClient(cfg Config) (*http.Transport, *http.Client) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	connect := cfg.Policy.ConnectTimeout
	if connect <= 0 {
		connect = 15 * time.Second
	}
	tr.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = connect
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = cfg.MaxIdle
	tr.IdleConnTimeout = cfg.IdleExpiry
	tr.ResponseHeaderTimeout = cfg.IdleTimeout
	egress.Apply(tr, cfg.ProxyURL)
	return tr, &http.Client{Transport: tr}
}

// onHTTP reports whether new generations use HTTP streaming at now.
func (c *Client) onHTTP(now time.Time) bool { return now.UnixNano() < c.httpUntil.Load() }

// fallBack puts the client on HTTP streaming for WSRetryAfter after a 426.
func (c *Client) fallBack() {
	now := time.Now()
	prev := c.httpUntil.Swap(now.Add(c.cfg.WSRetryAfter).UnixNano())
	c.fallbacks.Add(1)
	if prev < now.UnixNano() {
		c.log.Info("codex: the origin refused WebSockets (HTTP 426); using HTTP streaming",
			"retry_websockets_in", c.cfg.WSRetryAfter)
	}
}

// httpBody is frame without its "type": the body of an HTTP streaming request.
func httpBody(frame []byte) []byte {
	const prefix = `{"type":"response.create",` // how schemas.Request.Upstream starts every frame
	if bytes.HasPrefix(frame, []byte(prefix)) {
		return append([]byte{'{'}, frame[len(prefix):]...)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(frame, &m) != nil {
		return frame
	}
	delete(m, "type")
	b, _ := json.Marshal(m)
	return b
}

// generateHTTP runs the generation over HTTP streaming. Like a socket, it is retried once when a
// kept-alive connection fails before any response, and once after a 401 with the credentials
// the login.TokenSource gives then.
func (c *Client) generateHTTP(ctx context.Context, frame []byte, onEvent func(Event) error, res *Result) error {
	res.HTTP = true
	body := httpBody(frame)
	creds, err := c.src.Credentials()
	if err != nil {
		return err
	}
	for retried := false; ; retried = true {
		stale, err := c.postOnce(ctx, body, creds, onEvent, res)
		switch {
		case err == nil || retried || ctx.Err() != nil:
			return err
		case stale:
			c.retries.Add(1)
			res.Retried = true
			continue
		case isUnauthorized(err):
			next, uerr := c.src.Unauthorized(ctx, creds)
			if uerr != nil {
				return betterUnauthorized(err, uerr)
			}
			creds = next
			continue
		}
		return err
	}
}

// postOnce sends one HTTP streaming request and reads its events. stale reports a kept-alive
// connection that failed before any response: safe to send again.
func (c *Client) postOnce(ctx context.Context, body []byte, creds login.Credentials, onEvent func(Event) error, res *Result) (stale bool, err error) {
	red := origintext.NewRedactor(creds.Token, creds.AccountID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.httpURL, bytes.NewReader(body))
	if err != nil {
		return false, upstreamError("bad origin URL")
	}
	req.Header = c.header(uuid.NewString(), creds, HTTPBetaHeader)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	var reused bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	}))
	resp, err := c.httpc.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return false, cerr
		}
		if pe := asProxyError(err, red); pe != nil {
			return false, pe
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false, schemas.Errorf(schemas.CodeUpstreamTimeout, "codex: no answer from the origin within %s", c.cfg.IdleTimeout)
		}
		return reused, upstreamError("HTTP request to origin: %s", red.Clean(err.Error()))
	}
	c.reportHeaderLimits(resp)
	if resp.StatusCode != http.StatusOK {
		err := c.classifyStatus(resp, red, false)
		if isUnauthorized(err) {
			c.unauthorized.Add(1)
		}
		return false, err
	}
	c.httpResponses.Add(1)
	return false, c.readStream(ctx, resp.Body, red, onEvent, res)
}

// readStream reads server-sent events from body until a terminal event and closes body. A done
// ctx closes it at once; so does IdleTimeout without an event.
func (c *Client) readStream(ctx context.Context, body io.ReadCloser, red origintext.Redactor, onEvent func(Event) error, res *Result) error {
	var timedOut, draining atomic.Bool
	idle := time.AfterFunc(c.cfg.IdleTimeout, func() {
		timedOut.Store(!draining.Load())
		body.Close()
	})
	defer idle.Stop()
	stop := context.AfterFunc(ctx, func() { body.Close() })
	defer stop()
	defer body.Close()

	var readErr error
	for ev, err := range sse.Read(body, &sse.ReadConfig{MaxEventSize: maxFrame}) {
		if err != nil {
			readErr = err
			break
		}
		idle.Reset(c.cfg.IdleTimeout)
		if ev.Data == "" {
			continue // a keep-alive or an event with no data: nothing to dispatch
		}
		data := []byte(ev.Data)
		typ, jerr := eventType(data)
		if jerr != nil {
			return upstreamError("origin sent an event that is not a JSON object")
		}
		if typ == typeRateLimits {
			c.reportEventLimits(data)
			continue
		}
		typ, data = redactEvent(red, typ, data)
		done, err := c.deliver(typ, data, red, res, onEvent)
		if !done {
			continue
		}
		if err == nil {
			// Reading the stream's end lets the connection be kept alive.
			draining.Store(true)
			idle.Reset(drainWait)
			_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
		}
		return err
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case timedOut.Load():
		return c.idleError(res.Events)
	case readErr != nil:
		return upstreamError("HTTP stream failed before a terminal event: %s", red.Clean(readErr.Error()))
	}
	return upstreamError("HTTP stream ended before a terminal event")
}
