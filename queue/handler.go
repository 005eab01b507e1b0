package queue

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/schemas"
)

// forwardProbeTimeout bounds the round trip a draining worker makes to learn whether anybody
// took a request it handed back.
const forwardProbeTimeout = 5 * time.Second

// handle runs in micro's handler goroutine, one message at a time, so it never blocks: it refuses,
// hands back or starts a generation goroutine.
func (s *Service) handle(req micro.Request) {
	s.drain.enter()
	defer s.drain.exit()
	received := time.Now()
	if hook := s.testHook.Load(); hook != nil {
		(*hook)()
	}
	s.st.requests.Add(1)
	hdr := nats.Header(req.Headers())
	a := s.admit(admission{reply: req.Reply(), hdr: hdr, data: req.Data()})
	a.parent = remoteParent(hdr)
	if a.reply == "" {
		return // nowhere to answer, or nowhere this worker may answer
	}
	id := hdr.Get(schemas.HeaderRequestID)
	if id == "" {
		id = uuid.NewString()
	}
	if a.err != nil {
		s.refuse(req, id, a.parent, a.err)
		return
	}
	a.req.ID = id
	s.drain.mu.RLock()
	draining := s.drain.draining
	var busy *schemas.Error
	if !draining {
		var started bool
		if started, busy = s.start(a, received); started {
			s.drain.mu.RUnlock()
			return
		}
	}
	s.handBack(req, hdr, a.reply, id, draining, busy) // releases drain.mu
}

// start runs an admitted request in a slot of its own, if it gets one and the Generator (when
// it is an Admitter) has room for it. busy is the Generator's answer for when no worker has room.
func (s *Service) start(a admitted, received time.Time) (started bool, busy *schemas.Error) {
	if !s.slots.acquire() {
		return false, nil
	}
	release := func() {}
	if ad, ok := s.gen.(Admitter); ok {
		rel, err := ad.Admit(a.req)
		if err != nil {
			s.slots.release()
			if e, ok := schemas.AsError(err); ok {
				return false, e
			}
			return false, schemas.Errorf(schemas.CodeWorkerBusy, "worker %s: %v", s.cfg.WorkerID, err)
		}
		release = rel
	}
	deadline := received.Add(a.timeout)
	if !s.goTrack(func() {
		defer release()
		s.run(a, deadline, received)
	}) {
		release()
		s.slots.release()
		return false, nil
	}
	return true, nil
}

// refuse answers a request synchronously through micro, so micro's stats count the error. A
// request that asked for a stream also gets the end-of-stream sentinel after the error, so
// "request many" clients waiting for the empty message end at once.
func (s *Service) refuse(req micro.Request, id string, parent trace.SpanContext, e *schemas.Error) {
	s.st.countError(e.Code)
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	s.log.InfoContext(ctx, "request refused", "request_id", id, "status", e.Status, "code", e.Code, "error", e.Message)
	err := req.Error(strconv.Itoa(e.Status), e.Message, e.Body(), micro.WithHeaders(micro.Headers{
		schemas.HeaderRequestID: {id},
		schemas.HeaderWorker:    {s.cfg.WorkerID},
	}))
	if err != nil {
		s.log.WarnContext(ctx, "cannot send refusal", "request_id", id, "error", err)
		return
	}
	s.endRefusedStream(req.Reply(), id, req.Data())
}

// endRefusedStream sends the sentinel after an error reply to a request whose payload asks for a
// stream ("stream": true), even when the rest of it was refused.
func (s *Service) endRefusedStream(reply, id string, payload []byte) {
	if !wantsStream(payload) {
		return
	}
	if err := s.nc.Publish(reply, nil); err != nil {
		s.log.Warn("cannot send end-of-stream sentinel", "request_id", id, "error", err)
	}
}

func cloneHeader(h nats.Header) nats.Header {
	out := make(nats.Header, len(h)+1)
	for k, v := range h {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// asError maps what a Generator returned to the contract's error.
func asError(ctx context.Context, err error) *schemas.Error {
	// Whatever the generator made of it, a generation cut off by Shutdown is "unavailable".
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), errShutdown) {
		return schemas.Errorf(schemas.CodeUnavailable, "the worker shut down before the generation finished")
	}
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), errCancelled) {
		return schemas.Errorf(schemas.CodeCancelled, "the request was cancelled on the cancel subject")
	}
	if se, ok := schemas.AsError(err); ok {
		return se
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return schemas.Errorf(schemas.CodeUpstreamTimeout, "the request's deadline passed")
	case errors.Is(err, context.Canceled):
		return schemas.Errorf(schemas.CodeUnavailable, "the generation was cancelled")
	default:
		msg := err.Error()
		if len(msg) > 1024 {
			msg = msg[:1024]
		}
		return schemas.Errorf(schemas.CodeUpstreamError, "%s", msg)
	}
}
