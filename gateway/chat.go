package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gateway/chat"
	"github.com/codexpool/codexpool/schemas"
)

// POST /v1/chat/completions: the body is translated to a Responses request (gateway/chat), sent
// to the pool as a stream whatever the client asked, and the events translated back: as
// "data: <chat.completion.chunk>" lines and "data: [DONE]" with "stream": true, else folded into
// one chat.completion. Errors have the OpenAI shape and statuses of the Responses path; after the
// stream began, one "data: {"error": {...}}" line ends it, as OpenAI's own streams do.

// chatCompletions serves POST /v1/chat/completions.
func (g *Gateway) chatCompletions(w http.ResponseWriter, r *http.Request, id string) outcome {
	raw, a := g.readBody(w, r)
	if a != nil {
		a.write(w)
		return failed(a)
	}
	if g.log.Enabled(r.Context(), slog.LevelDebug) {
		g.log.LogAttrs(r.Context(), slog.LevelDebug, "request body", slog.String("request_id", id),
			slog.Int("bytes", len(raw)), slog.String("body", string(raw)))
	}
	req, err := chat.Translate(raw)
	if err != nil {
		a := chatRefusal(err)
		a.write(w)
		return failed(a)
	}
	ctx, hdr, done := g.poolCall(r, id)
	defer done()
	if req.Stream {
		o := g.chatStream(ctx, w, req, hdr, id)
		o.stream = true
		return o
	}
	return g.chatOneShot(ctx, w, req, hdr, id)
}

// chatRefusal is the 400 of a body chat.Translate refused, naming the field as the pool does.
func chatRefusal(err error) *apiError {
	var re *chat.RequestError
	if !errors.As(err, &re) {
		return newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, "", err.Error())
	}
	msg := re.Message
	if re.Param != "" {
		msg = strconv.Quote(re.Param) + ": " + msg
	}
	return newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, re.Param, msg)
}

// codeContextLength is OpenAI's code for a conversation over the model's context window, which
// chat clients read to trim or summarise their history instead of retrying.
const codeContextLength schemas.Code = "context_length_exceeded"

// chatPoolError is poolError with a context overflow at the origin (400 invalid_request_error,
// code context_length_exceeded) naming this API's field, messages.
func (g *Gateway) chatPoolError(ctx context.Context, err error) *apiError {
	a := g.poolError(ctx, err)
	if a.Code == codeContextLength {
		a.Param = "messages" // fromPool names the Responses API's field
	}
	return a
}

// chatBody is the pool request of a translated chat request.
func chatBody(req *chat.Request) poolBody {
	return poolBody{body: req.Body, model: req.Model, cacheKey: req.CacheKey, streaming: true}
}

// chatID is the chat completion id of the gateway's request id.
func chatID(id string) string { return "chatcmpl-" + id }

// chatOneShot consumes the pool's stream and answers with one chat.completion.
func (g *Gateway) chatOneShot(ctx context.Context, w http.ResponseWriter, req *chat.Request, hdr nats.Header, id string) outcome {
	c := chat.NewCompletion(req, chatID(id), time.Now())
	err := g.streamPool(ctx, chatBody(req), hdr, func(ev []byte) error {
		c.Event(ev)
		return nil
	})
	// The pool reports an incomplete response as an error after its terminal event: the client
	// gets the answer with finish_reason "length".
	if err != nil && !c.Done() {
		a := g.chatPoolError(ctx, err)
		a.write(w)
		return failed(a)
	}
	writeJSON(w, http.StatusOK, c.JSON())
	return ok(http.StatusOK)
}

// chatStream answers a "stream": true request with chunks, as the pool's events arrive. The
// first chunk (the role) is held until something follows it or a keep-alive is due, so that an
// origin failing right after response.created, as on a context overflow, is answered with a
// status rather than a 200 stream.
func (g *Gateway) chatStream(ctx context.Context, w http.ResponseWriter, req *chat.Request, hdr nats.Header, id string) outcome {
	tr := chat.NewStream(req, chatID(id), time.Now())
	sw := newSSE(w, g.cfg.WriteTimeout)
	var held []byte
	flush := func() error {
		if held == nil {
			return nil
		}
		err := sw.event("", held)
		held = nil
		return err
	}
	return g.relay(ctx, sw, chatBody(req), hdr, relay{
		onEvent: func(ev []byte) (bool, error) {
			wasDone := tr.Done()
			cs := tr.Event(ev)
			done := !wasDone && tr.Done()
			switch {
			case !sw.started && held == nil && len(cs) == 1 && !done:
				held = bytes.Clone(cs[0].JSON())
				return false, nil
			case len(cs) == 0 && !done:
				return false, nil
			}
			if err := flush(); err != nil {
				return true, err
			}
			return writeChunks(sw, cs, done)
		},
		onIdle: flush,
		onEnd: func(err, writeErr error) outcome {
			if tr.Done() {
				err = nil // an incomplete response: its chunks and [DONE] are out
			}
			if err == nil && writeErr == nil {
				writeErr = flush()
			}
			return g.endChatStream(ctx, w, sw, err, writeErr)
		},
	})
}

// writeChunks writes one event's chunks, and [DONE] after the terminal one.
func writeChunks(sw *sse, cs []chat.Chunk, done bool) (wrote bool, err error) {
	for _, c := range cs {
		if err := sw.event("", c.JSON()); err != nil {
			return true, err
		}
		wrote = true
	}
	if done {
		return true, sw.event("", []byte("[DONE]"))
	}
	return wrote, nil
}

// endChatStream answers the end of a chat stream, as endStream does for Responses, with the
// error line of Chat Completions streams.
func (g *Gateway) endChatStream(ctx context.Context, w http.ResponseWriter, sw *sse, err, writeErr error) outcome {
	return endStreamWith(w, sw, writeErr, err, func() *apiError { return g.chatPoolError(ctx, err) },
		func(a *apiError) error { return sw.event("", a.body()) })
}
