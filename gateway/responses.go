package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/jsonobj"
)

// poolBody is a request as the pipeline sends it: the Responses body for the pool, and what
// the pipeline reads of it (admission, metering, the sticky worker), found once, when the body
// was read (normalize) or translated.
type poolBody struct {
	body     []byte
	model    string // "" for the pool's default
	cacheKey string // prompt_cache_key
	// streaming says body has "stream": true already: it goes to the pool byte for byte.
	streaming bool
}

// request is a POST /v1/responses body, read and normalized for the pool.
type request struct {
	poolBody
	stream     bool
	background bool
}

// createResponse serves POST /v1/responses.
func (g *Gateway) createResponse(w http.ResponseWriter, r *http.Request, id string) outcome {
	raw, a := g.readBody(w, r)
	if a != nil {
		a.write(w)
		return failed(a)
	}
	if g.log.Enabled(r.Context(), slog.LevelDebug) {
		g.log.LogAttrs(r.Context(), slog.LevelDebug, "request body", slog.String("request_id", id),
			slog.Int("bytes", len(raw)), slog.String("body", string(raw)))
	}
	req, a := normalize(raw)
	if a != nil {
		a.write(w)
		return failed(a)
	}
	ctx, hdr, done := g.poolCall(r, id)
	defer done()
	switch {
	case req.background:
		return g.submitBackground(ctx, w, req, hdr)
	case req.stream:
		o := g.stream(ctx, w, req, hdr)
		o.stream = true
		return o
	}
	return g.oneShot(ctx, w, req, hdr)
}

// readBody reads the request body within Config.MaxBodyBytes and Config.BodyTimeout.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	rc := http.NewResponseController(w)
	// The deadline covers this body only; it is lifted before the answer streams.
	_ = rc.SetReadDeadline(time.Now().Add(g.cfg.BodyTimeout))
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	if r.ContentLength > g.cfg.MaxBodyBytes {
		return nil, tooLarge(r.ContentLength, g.cfg.MaxBodyBytes)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge(-1, g.cfg.MaxBodyBytes)
	case err != nil:
		return nil, newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, "", "gateway: reading the request body: "+err.Error())
	}
	return buf.Bytes(), nil
}

func tooLarge(n, limit int64) *apiError {
	msg := fmt.Sprintf("the request body is larger than the %d bytes this gateway accepts", limit)
	if n > 0 {
		msg = fmt.Sprintf("the request body is %d bytes, more than the %d this gateway accepts", n, limit)
	}
	return newAPIError(http.StatusRequestEntityTooLarge, schemas.CodeRequestTooLarge, "", msg)
}

// normalize reads, in one scan of the body's members, what the gateway routes on, refuses what
// the origin would (refused.go), and removes what the Responses API treats as absent but the pool
// would refuse: top-level members whose value is null (the SDKs and the Codex CLI send
// "instructions": null and the like) and "background": false. "background": true is taken out of
// the body too (a job is the plain request). Anything else is left byte for byte; a body that is
// not a JSON object goes to the pool as it is, which refuses it with the exact reason.
func normalize(raw []byte) (request, *apiError) {
	req := request{poolBody: poolBody{body: raw}}
	ms, isObj := jsonobj.Members(raw)
	if !isObj || !json.Valid(raw) {
		return req, nil
	}
	if a := refuseUnsupported(raw, ms); a != nil {
		return req, a
	}
	if v, found := jsonobj.Field(raw, ms, "prompt_cache_key"); found {
		_ = json.Unmarshal(v, &req.cacheKey)
	}
	if v, found := jsonobj.Field(raw, ms, "stream"); found {
		req.stream = bytes.Equal(v, []byte("true"))
	}
	if v, found := jsonobj.Field(raw, ms, "background"); found {
		req.background = bytes.Equal(v, []byte("true"))
	}
	if v, found := jsonobj.Field(raw, ms, "model"); found {
		_ = json.Unmarshal(v, &req.model)
	}
	req.body = jsonobj.Without(raw, ms, func(k, v []byte) bool {
		if jsonobj.IsNull(v) {
			return true
		}
		if jsonobj.KeyIs(k, "background") {
			return bytes.Equal(v, []byte("false")) || req.background
		}
		return false
	})
	return req, nil
}

// oneShot answers a request without "stream": true with the pool's one reply.
func (g *Gateway) oneShot(ctx context.Context, w http.ResponseWriter, req request, hdr nats.Header) outcome {
	reply, err := g.generate(ctx, req.poolBody, hdr)
	if err != nil {
		a := g.poolError(ctx, err)
		a.write(w)
		return failed(a)
	}
	writeJSON(w, http.StatusOK, withoutNullError(reply.Response))
	return ok(http.StatusOK)
}

// withoutNullError drops a top-level "error": null (a completed response carries one). It is
// harmless in a one-shot reply, but openai-go fails a stream on any event with a top-level
// "error" key, null or not, so the gateway sends none anywhere but in errors.
func withoutNullError(b []byte) []byte {
	if !bytes.Contains(b, []byte(`"error"`)) {
		return b
	}
	ms, isObj := jsonobj.Members(b)
	if !isObj {
		return b
	}
	return jsonobj.Without(b, ms, func(k, v []byte) bool { return jsonobj.KeyIs(k, "error") && jsonobj.IsNull(v) })
}

// stream answers a "stream": true request with server-sent events, as they arrive from the pool.
func (g *Gateway) stream(ctx context.Context, w http.ResponseWriter, req request, hdr nats.Header) outcome {
	sw := newSSE(w, g.cfg.WriteTimeout)
	pb := req.poolBody
	pb.streaming = true // normalize saw "stream": true
	return g.relay(ctx, sw, pb, hdr, relay{
		onEvent: func(ev []byte) (bool, error) {
			typ, ev, isError := inspectEvent(ev)
			if isError {
				// An origin "error" event: the pool's error message follows and is what the client
				// gets (as a status if nothing was sent yet). Forwarding this one would make the
				// SDKs fail on it before the real status could be sent.
				return false, nil
			}
			return true, sw.event(typ, ev)
		},
		onEnd: func(err, writeErr error) outcome { return g.endStream(ctx, w, sw, err, writeErr) },
	})
}

// endStream answers the end of a stream: err is what the pool request returned, writeErr the
// write that failed (the client is gone or stalled), if one did.
func (g *Gateway) endStream(ctx context.Context, w http.ResponseWriter, sw *sse, err, writeErr error) outcome {
	return endStreamWith(w, sw, writeErr, err, func() *apiError { return g.poolError(ctx, err) },
		func(a *apiError) error { return sw.event("error", a.streamFrame()) })
}

// endStreamWith is the end of a stream in any API: nothing more on a failed write; on the pool's
// error, the status when nothing was sent yet, else one error frame (frame writes it).
func endStreamWith(w http.ResponseWriter, sw *sse, writeErr, err error, apiErr func() *apiError, frame func(*apiError) error) outcome {
	switch {
	case writeErr != nil:
		return outcome{status: StatusClientClosed, code: CodeClientClosed, err: writeErr.Error()}
	case err == nil:
		return ok(http.StatusOK)
	}
	a := apiErr()
	if !sw.started {
		a.write(w)
		return failed(a)
	}
	if a.Status != StatusClientClosed {
		_ = frame(a)
	}
	o := failed(a)
	o.status = http.StatusOK // what went on the wire; code says what ended it
	return o
}

// inspectEvent returns the event's type and the event to forward (with a top-level
// "error": null removed), and reports whether it is an error event (a top-level "error" that is
// not null).
func inspectEvent(ev []byte) (typ string, out []byte, isError bool) {
	typ = fastType(ev)
	if typ != "" && !bytes.Contains(ev, []byte(`"error"`)) {
		return typ, ev, false
	}
	ms, isObj := jsonobj.Members(ev)
	if !isObj {
		return typ, ev, false
	}
	if v, found := jsonobj.Field(ev, ms, "error"); found {
		if !jsonobj.IsNull(v) {
			return typ, ev, true
		}
		ev = jsonobj.Without(ev, ms, func(k, v []byte) bool { return jsonobj.KeyIs(k, "error") && jsonobj.IsNull(v) })
		ms, _ = jsonobj.Members(ev)
	}
	if typ == "" {
		if v, found := jsonobj.Field(ev, ms, "type"); found {
			_ = json.Unmarshal(v, &typ)
		}
	}
	return typ, ev, false
}

// fastType reads the type of an event that starts with {"type":"...", as the origin's do.
func fastType(ev []byte) string {
	const prefix = `{"type":"`
	if !bytes.HasPrefix(ev, []byte(prefix)) {
		return ""
	}
	rest := ev[len(prefix):]
	end := bytes.IndexAny(rest, `"\`)
	if end < 0 || rest[end] != '"' {
		return ""
	}
	return string(rest[:end])
}

// sse writes server-sent events, flushing each one, each within its write timeout.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
	buf     []byte
}

func newSSE(w http.ResponseWriter, timeout time.Duration) *sse {
	return &sse{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (s *sse) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	s.w.WriteHeader(http.StatusOK)
}

// event writes "event: typ\ndata: data\n\n". Event JSON with line breaks (only possible as
// whitespace) is compacted first: a data line cannot hold one.
func (s *sse) event(typ string, data []byte) error {
	if bytes.ContainsAny(data, "\r\n") {
		var c bytes.Buffer
		if json.Compact(&c, data) == nil {
			data = c.Bytes()
		}
	}
	s.start()
	b := s.buf[:0]
	if typ != "" {
		b = append(b, "event: "...)
		b = append(b, typ...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	s.buf = b
	return s.write(b)
}

// comment writes ": text\n\n", which every SSE client ignores.
func (s *sse) comment(text string) error {
	s.start()
	return s.write([]byte(": " + text + "\n\n"))
}

// write writes and flushes b. A client that takes longer than the timeout to make room for it
// fails the write (where the server supports deadlines; net/http does). The last deadline also
// covers the server's end of the response; ServeHTTP lifts it for the connection's next request.
func (s *sse) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}
