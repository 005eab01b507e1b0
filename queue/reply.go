package queue

import (
	"context"
	"errors"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"

	"github.com/codexpool/codexpool/schemas"
)

// errStreamClosed is returned by emit once Generate has returned.
var errStreamClosed = errors.New("queue: emit after the generation returned")

// errGeneratorPanic is the error of a generation whose Generator panicked.
var errGeneratorPanic = errors.New("queue: the generator panicked")

// target is where a generation's messages go: a reply subject ("" = nowhere) and the headers
// that name the request (and the job) on every message.
type target struct {
	reply string
	id    string // Codex-Request-Id
	job   string // Codex-Job-Id; "" for codex.generate requests
	// acct is the account serving the generation (Codex-Account), as the Generator notes it.
	acct *atomic.Pointer[string]
	// span is the generation's span: every message to t carries it as traceparent (trace.go).
	span trace.SpanContext
}

// withAccount returns ctx with the account note that fills t.acct.
func (t target) withAccount(ctx context.Context) context.Context {
	if t.acct == nil {
		return ctx
	}
	return schemas.WithAccountNote(ctx, func(name string) { t.acct.Store(&name) })
}

// header returns the headers every message to t carries.
func (s *Service) header(t target) nats.Header {
	h := nats.Header{
		schemas.HeaderRequestID: {t.id},
		schemas.HeaderWorker:    {s.cfg.WorkerID},
	}
	if t.job != "" {
		h.Set(schemas.HeaderJobID, t.job)
	}
	if t.acct != nil {
		if a := t.acct.Load(); a != nil {
			h.Set(schemas.HeaderAccount, *a)
		}
	}
	return h
}

// tracedHeader is header with the generation's trace context (traceparent), which the one-shot
// reply, an error, a job's stored answer and a stream's first event carry back. The other
// events of a stream go without it: the NATS server reads the headers of every message that
// has one (its own message tracing), a cost per event for nothing the client does not know.
func (s *Service) tracedHeader(t target) nats.Header {
	h := s.header(t)
	if t.span.IsValid() {
		tracing.InjectNATS(trace.ContextWithSpanContext(context.Background(), t.span), h)
	}
	return h
}

// outcome is how one generation ended.
type outcome struct {
	// payload is the one-shot reply: the response with output_text. A streamed generation that
	// captured its response.completed event has it too (jobs store it).
	payload []byte
	err     *schemas.Error
	seq     int // streamed: the last Codex-Seq published
	events  int // streamed: events published to the target
}

// body is what codex.generate would reply: the payload, or the error body.
func (o outcome) body() []byte {
	if o.err != nil {
		return o.err.Body()
	}
	return o.payload
}

// run executes one generation in its own goroutine and answers on reply.
func (s *Service) run(a admitted, deadline, received time.Time) {
	r := a.req
	ctx, span := s.startProcess(s.base, a.parent, "process "+s.cfg.Subject, r, received)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	ctx, done := s.cancellable(ctx, r.ID)
	defer done()
	t := target{reply: a.reply, id: r.ID, acct: new(atomic.Pointer[string]), span: span.SpanContext()}
	o := s.fitPayload(s.execute(ctx, r, t, r.Stream, false))
	s.finish(ctx, r, o, received)
	s.slots.release() // free before the last message, so whoever got the reply sees a free slot
	s.answer(t, r.Stream, o)
	endSpan(span, o.err)
}

// execute runs r, streaming its events to t when streamed is set (capturing the completed response
// as the payload when capture is set), and maps what the Generator returned to the contract.
func (s *Service) execute(ctx context.Context, r *schemas.Request, t target, streamed, capture bool) outcome {
	s.st.started.Add(1)
	s.st.inflight.Add(1)
	ctx = t.withAccount(ctx)
	var o outcome
	if streamed {
		st := &stream{s: s, t: t, capture: capture}
		_, err := s.generate(ctx, r, st.emit)
		o.seq, o.payload = st.close()
		o.events = o.seq
		if err != nil {
			o.err = asError(ctx, err)
		} else if capture && o.payload == nil {
			o.err = schemas.Errorf(schemas.CodeUpstreamError, "the stream ended without response.completed")
		}
		return o
	}
	payload, err := s.generate(ctx, r, nil)
	switch {
	case err != nil:
		o.err = asError(ctx, err)
	case len(payload) == 0:
		o.err = schemas.Errorf(schemas.CodeUpstreamError, "the generation returned an empty reply")
	default:
		o.payload = payload
	}
	return o
}

// finish counts a finished generation (before its last message goes out, so whoever got the
// reply sees final stats).
func (s *Service) finish(ctx context.Context, r *schemas.Request, o outcome, received time.Time) {
	took := time.Since(received)
	s.st.latencyNS.Add(int64(took))
	if e := o.err; e != nil {
		s.st.failed.Add(1)
		s.st.countError(e.Code)
		s.log.DebugContext(ctx, "generation failed", "request_id", r.ID, "stream", r.Stream, "status", e.Status, "code", e.Code, "error", e.Message, "duration", took)
	} else {
		s.st.completed.Add(1)
		s.log.DebugContext(ctx, "generation completed", "request_id", r.ID, "stream", r.Stream, "duration", took)
	}
	s.st.inflight.Add(-1)
}

// answer sends the end of a generation to t: for a stream the error (if any) and the sentinel,
// else the reply or the error.
func (s *Service) answer(t target, streamed bool, o outcome) {
	if t.reply == "" {
		return
	}
	switch {
	case streamed:
		if o.err != nil {
			s.replyError(t, o.seq+1, o.err)
		}
		s.sentinel(t)
	case o.err != nil:
		s.replyError(t, 0, o.err)
	default:
		if err := s.nc.PublishMsg(&nats.Msg{Subject: t.reply, Data: o.payload, Header: s.tracedHeader(t)}); err != nil {
			s.log.Warn("cannot send reply", "request_id", t.id, "error", err)
		}
	}
}

// sentinel ends a stream: an empty payload and no headers, always last.
func (s *Service) sentinel(t target) {
	if err := s.nc.Publish(t.reply, nil); err != nil {
		s.log.Warn("cannot send end-of-stream sentinel", "request_id", t.id, "error", err)
	}
}

// replyError publishes an error reply outside micro's handler; the caller counts it. seq > 0 adds
// Codex-Seq (streams).
func (s *Service) replyError(t target, seq int, e *schemas.Error) {
	h := s.tracedHeader(t)
	h.Set(schemas.HeaderServiceErrorCode, strconv.Itoa(e.Status))
	h.Set(schemas.HeaderServiceError, e.Message)
	if seq > 0 {
		h.Set(schemas.HeaderSeq, strconv.Itoa(seq))
	}
	if err := s.nc.PublishMsg(&nats.Msg{Subject: t.reply, Data: e.Body(), Header: h}); err != nil {
		s.log.Warn("cannot send error reply", "request_id", t.id, "error", err)
	}
}

// generate calls the Generator; a panic becomes an error (502) instead of taking the worker down.
func (s *Service) generate(ctx context.Context, r *schemas.Request, emit func([]byte) error) (payload []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.ErrorContext(ctx, "generator panicked", "request_id", r.ID, "panic", v, "stack", string(debug.Stack()))
			payload, err = nil, errGeneratorPanic // the value stays in the log: it may hold anything
		}
	}()
	return s.gen.Generate(ctx, r, emit)
}

// stream publishes the events of one streamed generation, numbering them with Codex-Seq.
type stream struct {
	s       *Service
	t       target
	capture bool // keep the response of response.completed (with output_text)

	mu        sync.Mutex
	seq       int
	closed    bool
	completed []byte
}

// emit publishes one event. Empty events are skipped: only the sentinel may be empty.
func (st *stream) emit(event []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return errStreamClosed
	}
	if len(event) == 0 {
		return nil
	}
	if st.capture {
		if raw, ok := schemas.CompletedResponse(event); ok {
			if resp, err := schemas.WithOutputText(raw); err == nil {
				st.completed = resp
			}
		}
	}
	if st.t.reply == "" {
		return nil
	}
	st.seq++
	h := st.s.header(st.t)
	if st.seq == 1 {
		h = st.s.tracedHeader(st.t)
	}
	h.Set(schemas.HeaderSeq, strconv.Itoa(st.seq))
	return st.s.nc.PublishMsg(&nats.Msg{Subject: st.t.reply, Data: event, Header: h})
}

// close ends emitting and returns the last Codex-Seq used and the captured response.
func (st *stream) close() (int, []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	return st.seq, st.completed
}
