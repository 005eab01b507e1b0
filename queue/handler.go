package queue

import (
	"context"
	"encoding/json"
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

	s.gate.RLock()
	draining := s.draining
	ok := !draining && s.tryAcquire()
	if ok {
		deadline := received.Add(timeout)
		ok = s.goTrack(func() { s.run(r, reply, deadline, received) })
		if !ok {
			<-s.slot
		}
	}
	if ok {
		s.gate.RUnlock()
		return
	}
	hops, _ := strconv.Atoi(hdr.Get(schemas.HeaderHops))
	hops = max(hops, 0) // a negative count must not buy extra rounds
	if hops >= s.cfg.MaxHops {
		s.gate.RUnlock()
		if draining {
			s.refuse(req, id, schemas.Errorf(schemas.CodeUnavailable, "worker %s is shutting down", s.cfg.WorkerID))
		} else {
			s.st.busy.Add(1)
			s.refuse(req, id, schemas.Errorf(schemas.CodeWorkerBusy,
				"worker %s is full (%d in flight) and the request was handed back %d times", s.cfg.WorkerID, s.cfg.MaxInflight, hops))
		}
		return
	}
	fwd := &nats.Msg{Subject: s.cfg.Subject, Reply: reply, Data: req.Data(), Header: cloneHeader(hdr)}
	fwd.Header.Set(schemas.HeaderHops, strconv.Itoa(hops+1))
	s.st.forwarded.Add(1)
	if !draining {
		// Our own subscription is live and this publish precedes any UNSUB (gate), so the server
		// always has a group member to hand it to.
		err := s.nc.PublishMsg(fwd)
		s.gate.RUnlock()
		if err != nil {
			s.refuse(req, id, schemas.Errorf(schemas.CodeWorkerBusy, "worker %s is full and could not hand the request back: %v", s.cfg.WorkerID, err))
		}
		return
	}
	s.gate.RUnlock()
	// Draining: our subscription is gone and maybe nobody else is there. Learn that off the handler
	// goroutine while Shutdown still waits; afterwards do it inline (nothing else needs the handler).
	if !s.goTrack(func() { s.forwardDraining(fwd, id) }) {
		s.forwardDraining(fwd, id)
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

// forwardDraining hands fwd back to the queue group and answers 503 unavailable when nobody took
// it. The NATS server reports "no responders" only to the publisher, and only when the publisher is
// subscribed to the reply subject: so subscribe to it for one round trip.
func (s *Service) forwardDraining(fwd *nats.Msg, id string) {
	unavailable := schemas.Errorf(schemas.CodeUnavailable, "worker %s is shutting down and no other worker took the request", s.cfg.WorkerID)
	fail := func() {
		s.st.countError(unavailable.Code)
		s.replyError(fwd.Reply, id, 0, unavailable)
		s.endRefusedStream(fwd.Reply, id, fwd.Data)
	}
	// Only the first message on the reply subject matters (the status, or the other worker's first
	// reply); AutoUnsubscribe(1) keeps the rest of a long reply away from this one-slot channel.
	ch := make(chan *nats.Msg, 1)
	sub, err := s.nc.ChanSubscribe(fwd.Reply, ch)
	if errors.Is(err, nats.ErrConnectionDraining) {
		// Too late to listen for "no responders" (Shutdown normally prevents this): hand the
		// request back anyway, since another worker is far likelier than none.
		s.log.Warn("handing back a request during shutdown without a no-responders check", "request_id", id)
		if perr := s.nc.PublishMsg(fwd); perr != nil {
			fail()
		}
		return
	}
	if err == nil {
		err = sub.AutoUnsubscribe(1)
	}
	if err != nil {
		fail()
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishMsg(fwd); err != nil {
		fail()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), forwardProbeTimeout)
	defer cancel()
	if err := s.nc.FlushWithContext(ctx); err != nil {
		s.log.Warn("hand-back during shutdown unconfirmed", "request_id", id, "error", err)
		return
	}
	// The server queues its status before the flush's PONG, and a channel subscription receives
	// in the reading goroutine: if it came, it is in ch now.
	select {
	case m := <-ch:
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			s.log.Info("no other worker for a request during shutdown", "request_id", id)
			fail()
		}
	default: // somebody took it and has not answered yet
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
	var r struct {
		Stream any `json:"stream"`
	}
	if json.Unmarshal(payload, &r) != nil || r.Stream != true {
		return
	}
	if err := s.nc.Publish(reply, nil); err != nil {
		s.log.Warn("cannot send end-of-stream sentinel", "request_id", id, "error", err)
	}
}

// replyError publishes an error reply outside micro's handler; the caller counts it. seq > 0 adds
// Codex-Seq (streams).
func (s *Service) replyError(reply, id string, seq int, e *schemas.Error) {
	m := &nats.Msg{Subject: reply, Data: e.Body(), Header: nats.Header{
		schemas.HeaderServiceErrorCode: {strconv.Itoa(e.Status)},
		schemas.HeaderServiceError:     {e.Message},
		schemas.HeaderRequestID:        {id},
		schemas.HeaderWorker:           {s.cfg.WorkerID},
	}}
	if seq > 0 {
		m.Header.Set(schemas.HeaderSeq, strconv.Itoa(seq))
	}
	if err := s.nc.PublishMsg(m); err != nil {
		s.log.Warn("cannot send error reply", "request_id", id, "error", err)
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
