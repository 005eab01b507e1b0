package queue

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/validate"
)

// forwardProbeTimeout bounds the round trip a draining worker makes to learn whether anybody
// took a request it handed back.
const forwardProbeTimeout = 5 * time.Second

// handle runs in micro's handler goroutine, one message at a time, so it never blocks: it refuses,
// hands back or starts a generation goroutine.
func (s *Service) handle(req micro.Request) {
	s.handling.Add(1)
	defer func() {
		s.lastHandled.Store(time.Now().UnixNano())
		s.handling.Add(-1)
	}()
	received := time.Now()
	if hook := s.testHook.Load(); hook != nil {
		(*hook)()
	}
	s.st.requests.Add(1)
	reply := req.Reply()
	if reply == "" {
		s.st.noReply.Add(1)
		s.log.Warn("request without a reply subject dropped", "subject", req.Subject(), "bytes", len(req.Data()))
		return
	}
	hdr := nats.Header(req.Headers())
	id := hdr.Get(schemas.HeaderRequestID)
	if id == "" {
		id = uuid.NewString()
	}
	if n := len(req.Data()); n > s.cfg.MaxRequestBytes {
		s.refuse(req, id, schemas.Errorf(schemas.CodeRequestTooLarge,
			"request is %d bytes, more than the %d this worker accepts", n, s.cfg.MaxRequestBytes))
		return
	}
	timeout := s.cfg.RequestTimeout
	if v := hdr.Get(schemas.HeaderTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			s.refuse(req, id, schemas.Errorf(schemas.CodeInvalidRequest,
				"%s header %q is not a positive Go duration (e.g. 90s)", schemas.HeaderTimeout, v))
			return
		}
		timeout = min(timeout, d)
	}
	r, err := validate.Request(req.Data())
	if err != nil {
		se, ok := schemas.AsError(err)
		if !ok {
			se = schemas.Errorf(schemas.CodeInvalidRequest, "%v", err)
		}
		s.refuse(req, id, se)
		return
	}
	r.ID = id

	s.drainMu.RLock()
	draining := s.draining
	ok := !draining && s.acquire()
	if ok {
		deadline := received.Add(timeout)
		ok = s.goTrack(func() { s.run(r, reply, deadline, received) })
		if !ok {
			s.release()
		}
	}
	if ok {
		s.drainMu.RUnlock()
		return
	}
	s.handBack(req, hdr, reply, id, draining) // releases drainMu
}

// acquire takes an in-flight slot for a request without blocking: a free one, or the one the
// jobs pull loop holds while it waits for a job. Under pullMu, the loop holds a slot only in the
// stealable state while it waits, so a request never finds every slot taken by a loop that has
// reserved one but not yet said so.
func (s *Service) acquire() bool {
	if s.tryAcquire() {
		return true
	}
	if s.jobs == nil {
		return false
	}
	s.pullMu.Lock()
	defer s.pullMu.Unlock()
	return s.tryAcquire() || s.stealPullSlot()
}

// release frees an in-flight slot and wakes the jobs pull loop if it waits for one.
func (s *Service) release() {
	<-s.slot
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// tryAcquire takes an in-flight slot without blocking.
func (s *Service) tryAcquire() bool {
	select {
	case s.slot <- struct{}{}:
		return true
	default:
		return false
	}
}

// refuse answers a request synchronously through micro, so micro's stats count the error. A
// request that asked for a stream also gets the end-of-stream sentinel after the error, so
// "request many" clients waiting for the empty message end at once.
func (s *Service) refuse(req micro.Request, id string, e *schemas.Error) {
	s.st.countError(e.Code)
	s.log.Info("request refused", "request_id", id, "status", e.Status, "code", e.Code, "error", e.Message)
	err := req.Error(strconv.Itoa(e.Status), e.Message, e.Body(), micro.WithHeaders(micro.Headers{
		schemas.HeaderRequestID: {id},
		schemas.HeaderWorker:    {s.cfg.WorkerID},
	}))
	if err != nil {
		s.log.Warn("cannot send refusal", "request_id", id, "error", err)
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
