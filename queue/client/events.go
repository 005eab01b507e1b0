package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/schemas"
)

// ErrIdle is returned by Events.Next when no event came within the idle time (Events.SetIdle):
// the stream is still open, and the next call goes on waiting.
var ErrIdle = errors.New("client: no event within the idle time")

// Events is one streamed pool request, read an event at a time with Next: the pull-style form of
// Stream, for callers that write each event somewhere (an HTTP stream) and do something else
// while the origin is silent (a keep-alive). Make one with Client.Open; Close it when done. Not
// safe for concurrent use.
type Events struct {
	c      *Client
	ctx    context.Context // the request's: Open's ctx with the client's Timeout
	cancel context.CancelFunc
	body   []byte
	hdr    nats.Header

	sub     *nats.Subscription
	q       *msgQueue
	seq     int // the last Codex-Seq read
	attempt int // worker_busy retries made
	reply   Reply
	end     error // io.EOF after the sentinel, else why the stream ended; nil while open

	idle  time.Duration
	timer *time.Timer
	span  trace.Span // the request's (trace.go), ended with the stream
}

// Open sends req with "stream": true set and returns its events. Errors that come before any
// event (no responders, a refusal) are returned by the first Next; a worker_busy answer before
// any event is retried as configured, inside Next. Open's ctx bounds the whole request.
func (c *Client) Open(ctx context.Context, req []byte, hdr nats.Header) (*Events, error) {
	body, err := forceStream(req)
	if err != nil {
		return nil, err
	}
	return c.OpenStreaming(ctx, body, hdr)
}

// OpenStreaming is Open for a req that asks for a stream ("stream": true) already, such as one
// the caller built: it is sent byte for byte, without being read.
func (c *Client) OpenStreaming(ctx context.Context, req []byte, hdr nats.Header) (*Events, error) {
	e := &Events{c: c, body: req, hdr: withRequestID(hdr)}
	e.ctx, e.cancel = c.withTimeout(ctx)
	e.ctx, e.span = startRequest(e.ctx, "request", c.opts.Subject, e.hdr.Get(schemas.HeaderRequestID), trace.SpanKindClient)
	if err := e.send(); err != nil {
		endRequest(e.span, nil, err)
		e.cancel()
		return nil, err
	}
	return e, nil
}

// send publishes the request on a new inbox.
func (e *Events) send() error {
	if e.sub != nil {
		_ = e.sub.Unsubscribe()
	}
	inbox := e.c.nc.NewRespInbox()
	// An async subscription feeding our own queue: a sync one preallocates a 64K-slot channel
	// (512 KiB) per stream, which dominated the cost of a streamed request.
	e.q = newMsgQueue()
	sub, err := e.c.nc.Subscribe(inbox, e.q.push)
	if err != nil {
		return fmt.Errorf("queue: subscribe %s: %w", inbox, err)
	}
	e.sub = sub
	m := e.c.request(e.ctx, e.body, e.hdr)
	m.Reply = inbox
	if err := e.c.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("queue: publish on %s: %w", e.c.opts.Subject, err)
	}
	return nil
}

// SetIdle makes Next return ErrIdle after d without an event; 0 (the default) waits as long as
// the request lasts.
func (e *Events) SetIdle(d time.Duration) { e.idle = d }

// Started reports whether an event has been returned: after that, the request is not sent again.
func (e *Events) Started() bool { return e.seq > 0 }

// Next returns the next event in Codex-Seq order. At the end-of-stream sentinel it returns
// io.EOF, and Reply is built from the response.completed event; an error message ends the
// stream with a *schemas.Error. When ctx (or Open's) ends first, the pool is told to stop the
// request and ctx's error is returned. After the end every call returns the same error.
func (e *Events) Next(ctx context.Context) ([]byte, error) {
	for e.end == nil {
		msg, err := e.pop(ctx)
		switch {
		case errors.Is(err, ErrIdle):
			return nil, err
		case err != nil:
			e.stop(err)
			e.c.cancel(e.hdr.Get(schemas.HeaderRequestID))
			return nil, err
		}
		ev, err := e.read(msg)
		if err == nil {
			return ev, nil
		}
		if !e.retryBusy(err) {
			e.stop(err)
		}
	}
	return nil, e.end
}

// pop waits for the next message, until ctx or the request ends, or the idle time passes.
func (e *Events) pop(ctx context.Context) (*nats.Msg, error) {
	if e.idle <= 0 {
		return e.q.pop(ctx, e.ctx, nil)
	}
	if e.timer == nil {
		e.timer = time.NewTimer(e.idle)
	} else {
		e.timer.Reset(e.idle)
	}
	defer e.timer.Stop()
	return e.q.pop(ctx, e.ctx, e.timer.C)
}

// read checks one message: the event it carries, io.EOF at the sentinel, or the error that ends
// the stream.
func (e *Events) read(msg *nats.Msg) ([]byte, error) {
	if len(msg.Data) == 0 {
		if len(msg.Header) == 0 {
			if e.reply.Response == nil {
				return nil, errors.New("queue: stream ended without response.completed")
			}
			return nil, io.EOF // the sentinel
		}
		if msg.Header.Get("Status") == "503" {
			return nil, fmt.Errorf("queue: request on %s: %w", e.c.opts.Subject, nats.ErrNoResponders)
		}
	}
	if err := replyError(msg); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(msg.Header.Get(schemas.HeaderSeq))
	if err != nil || n != e.seq+1 {
		return nil, fmt.Errorf("queue: stream event out of order: got Codex-Seq %q, want %d", msg.Header.Get(schemas.HeaderSeq), e.seq+1)
	}
	e.seq = n
	if n == 1 {
		e.reply.RequestID = msg.Header.Get(schemas.HeaderRequestID)
		e.reply.Worker = msg.Header.Get(schemas.HeaderWorker)
	}
	if a := msg.Header.Get(schemas.HeaderAccount); a != "" {
		e.reply.Account = a
	}
	if raw, ok := schemas.CompletedResponse(msg.Data); ok {
		resp, err := schemas.WithOutputText(raw)
		if err != nil {
			resp = raw
		}
		e.reply.Response = resp
		e.reply.OutputText = outputText(resp)
	}
	return msg.Data, nil
}

// retryBusy sends the request again after a worker_busy answer that came before any event, while
// retries are left; it reports whether it did.
func (e *Events) retryBusy(err error) bool {
	se, ok := schemas.AsError(err)
	if !ok || se.Code != schemas.CodeWorkerBusy || e.seq > 0 || e.attempt >= e.c.opts.RetryBusy {
		return false
	}
	if err := sleepCtx(e.ctx, busyWait(e.attempt, se.RetryAfter)); err != nil {
		e.stop(err)
		return true // the loop ends on e.end
	}
	e.attempt++
	if err := e.send(); err != nil {
		e.stop(err)
	}
	return true
}

// stop ends the stream with err.
func (e *Events) stop(err error) {
	if e.end == nil {
		e.end = err
		endRequest(e.span, &e.reply, err)
	}
}

// Reply is the request's reply once Next returned io.EOF; nil before that.
func (e *Events) Reply() *Reply {
	if !errors.Is(e.end, io.EOF) {
		return nil
	}
	r := e.reply
	return &r
}

// Close ends the request: a stream that did not reach its end is stopped at the pool. Close is
// idempotent.
func (e *Events) Close() {
	if e.end == nil {
		e.stop(errors.New("client: events closed"))
		e.c.cancel(e.hdr.Get(schemas.HeaderRequestID))
	}
	if e.sub != nil {
		_ = e.sub.Unsubscribe()
		e.sub = nil
	}
	e.cancel()
}
