package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gateway/anthropic"
	"github.com/codexpool/codexpool/schemas"
)

// The Anthropic Messages API (POST /v1/messages, POST /v1/messages/count_tokens), translated to
// and from the pool's Responses requests by package anthropic. Keys come as x-api-key or
// Authorization: Bearer; any anthropic-version is accepted; every error is in Anthropic's shape.

// translateMessage reads and translates a /v1/messages (or count_tokens) body.
func (g *Gateway) translateMessage(w http.ResponseWriter, r *http.Request) (anthropic.Translated, *anthropic.Error) {
	raw, a := g.readBody(w, r)
	if a != nil {
		return anthropic.Translated{}, toAnthropic(a)
	}
	if g.log.Enabled(r.Context(), slog.LevelDebug) {
		g.log.LogAttrs(r.Context(), slog.LevelDebug, "request body", slog.String("path", r.URL.Path),
			slog.Int("bytes", len(raw)), slog.String("body", string(raw)))
	}
	tr, err := anthropic.Translate(raw, anthropic.Options{
		Models: g.cfg.ModelMap, Served: g.cfg.Models,
		SessionID: r.Header.Get("X-Claude-Code-Session-Id"), AgentID: r.Header.Get("X-Claude-Code-Agent-Id"),
	})
	var e *anthropic.Error
	if errors.As(err, &e) {
		return tr, e
	}
	return tr, nil
}

// messageBody is the pool request of a translated message.
func messageBody(tr anthropic.Translated) poolBody {
	return poolBody{body: tr.Body, model: tr.PoolModel, cacheKey: tr.CacheKey, streaming: true}
}

// createMessage serves POST /v1/messages. Both forms stream from the pool: a client without
// "stream": true gets the collected message, so an incomplete answer is a message with
// stop_reason max_tokens, not an error.
func (g *Gateway) createMessage(w http.ResponseWriter, r *http.Request, id string) outcome {
	tr, e := g.translateMessage(w, r)
	if e != nil {
		return writeAnthropic(w, e, nil)
	}
	ctx, hdr, done := g.poolCall(r, id)
	defer done()
	if tr.Stream {
		o := g.streamMessage(ctx, w, tr, hdr)
		o.stream = true
		return o
	}
	var col anthropic.Collector
	err := g.streamPool(ctx, messageBody(tr), hdr, func(ev []byte) error { col.Event(ev); return nil })
	if !col.Done() {
		if err == nil {
			err = errors.New("the pool's stream ended without a terminal event")
		}
		return g.messageError(w, g.poolError(ctx, err))
	}
	writeJSON(w, http.StatusOK, col.Message(tr.Model, tr.Names))
	return ok(http.StatusOK)
}

// countTokens serves POST /v1/messages/count_tokens: the translated request's input counted
// here, with the o200k encoding; nothing goes to the pool.
func (g *Gateway) countTokens(w http.ResponseWriter, r *http.Request, _ string) outcome {
	tr, e := g.translateMessage(w, r)
	if e != nil {
		return writeAnthropic(w, e, nil)
	}
	n, err := anthropic.CountTokens(tr.Body)
	if err != nil {
		return writeAnthropic(w, &anthropic.Error{Status: http.StatusInternalServerError, Type: "api_error",
			Message: "gateway: counting tokens: " + err.Error()}, nil)
	}
	writeJSON(w, http.StatusOK, []byte(`{"input_tokens":`+strconv.Itoa(n)+`}`))
	return ok(http.StatusOK)
}

// toAnthropic maps the gateway's error to Anthropic's shape and status.
func toAnthropic(a *apiError) *anthropic.Error {
	return anthropic.FromStatus(a.Status, a.UpstreamCode, a.Message, a.RetryAfter)
}

// messageError answers with a in Anthropic's shape, keeping its retry headers.
func (g *Gateway) messageError(w http.ResponseWriter, a *apiError) outcome {
	if a.Status == StatusClientClosed {
		return failed(a)
	}
	return writeAnthropic(w, toAnthropic(a), a)
}

// writeAnthropic writes e; a, when set, is the gateway error it came from (retry headers, log).
func writeAnthropic(w http.ResponseWriter, e *anthropic.Error, a *apiError) outcome {
	if a == nil {
		a = &apiError{Status: e.Status, Code: schemas.CodeInvalidRequest, Message: e.Message, RetryAfter: e.RetryAfter}
		if e.Status >= 500 {
			a.Code = schemas.CodeUpstreamError
		}
	}
	a.writeHeaders(w.Header())
	writeJSON(w, e.Status, e.Body())
	o := failed(a)
	o.status = e.Status
	return o
}

// streamMessage answers a "stream": true message with Anthropic SSE frames, translated from the
// pool's events as they arrive, with keep-alives while the origin is silent. The origin's own
// error events are skipped: the pool's error follows them and is what the client gets (a status
// while only message_start was due, one error frame after that).
func (g *Gateway) streamMessage(ctx context.Context, w http.ResponseWriter, tr anthropic.Translated, hdr nats.Header) outcome {
	sw := newSSE(w, g.cfg.WriteTimeout)
	st := anthropic.NewStream(tr.Model, tr.Names)
	var held []anthropic.Frame // message_start, until something follows it
	flush := func() error {
		err := writeFrames(sw, held)
		held = nil
		return err
	}
	return g.relay(ctx, sw, messageBody(tr), hdr, relay{
		onEvent: func(ev []byte) (bool, error) {
			if typ := fastType(ev); typ == "error" || typ == "response.failed" {
				return false, nil
			}
			// The status is decided by the first frame after message_start: an origin that fails
			// right after response.created is answered with a real status, not a 200 stream.
			if held = append(held, st.Event(ev)...); len(held) == 1 && held[0].Event == "message_start" {
				return false, nil
			}
			return true, flush()
		},
		onIdle: flush,
		onEnd:  func(err, writeErr error) outcome { return g.endMessageStream(ctx, w, sw, st, err, writeErr) },
	})
}

// writeFrames writes frames as SSE events, stopping at the first failed write.
func writeFrames(sw *sse, frames []anthropic.Frame) error {
	for _, f := range frames {
		if err := sw.event(f.Event, f.Data); err != nil {
			return err
		}
	}
	return nil
}

// endMessageStream answers the end of a message stream: a translated stream that ended (also
// an incomplete one, which the pool reports as an error) is a success; otherwise the pool's error
// is a status before the first frame and one "event: error" frame after it.
func (g *Gateway) endMessageStream(ctx context.Context, w http.ResponseWriter, sw *sse, st *anthropic.Stream, err, writeErr error) outcome {
	switch {
	case writeErr != nil:
		return outcome{status: StatusClientClosed, code: CodeClientClosed, err: writeErr.Error()}
	case st.Done():
		return ok(http.StatusOK)
	case err == nil:
		err = errors.New("the pool's stream ended without a terminal event")
	}
	a := g.poolError(ctx, err)
	if !sw.started {
		return g.messageError(w, a)
	}
	if a.Status != StatusClientClosed {
		f := toAnthropic(a).Frame()
		_ = sw.event(f.Event, f.Data)
	}
	o := failed(a)
	o.status = http.StatusOK
	return o
}
