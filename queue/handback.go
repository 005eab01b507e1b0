package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/codexpool/codexpool/schemas"
)

// handBack gives a request this worker cannot take (it is full, or draining) back to the queue
// group with Codex-Hops one higher, or answers it at once when it has been handed back MaxHops
// times: 429 worker_busy (busy, the Admitter's answer, when it refused the request), or 503
// unavailable while draining. It is called with drain.mu read-held and releases it.
func (s *Service) handBack(req micro.Request, hdr nats.Header, reply, id string, draining bool, busy *schemas.Error) {
	hops, _ := strconv.Atoi(hdr.Get(schemas.HeaderHops))
	hops = max(hops, 0) // a negative count must not buy extra rounds
	if hops >= s.cfg.MaxHops {
		s.drain.mu.RUnlock()
		if draining {
			s.refuse(req, id, remoteParent(hdr), schemas.Errorf(schemas.CodeUnavailable, "worker %s is shutting down", s.cfg.WorkerID))
		} else if busy != nil {
			s.st.busy.Add(1)
			e := *busy
			e.Message = fmt.Sprintf("%s; the request was handed back %d times", e.Message, hops)
			s.refuse(req, id, remoteParent(hdr), &e)
		} else {
			s.st.busy.Add(1)
			s.refuse(req, id, remoteParent(hdr), schemas.Errorf(schemas.CodeWorkerBusy,
				"worker %s is full (%d in flight) and the request was handed back %d times", s.cfg.WorkerID, s.cfg.MaxInflight, hops))
		}
		return
	}
	fwd := &nats.Msg{Subject: s.cfg.Subject, Reply: reply, Data: req.Data(), Header: cloneHeader(hdr)}
	fwd.Header.Set(schemas.HeaderHops, strconv.Itoa(hops+1))
	s.handBackSpan(fwd, id, hops+1)
	s.st.forwarded.Add(1)
	if !draining {
		// Our own subscription is live and this publish precedes any UNSUB (drain.mu), so the server
		// always has a group member to hand it to.
		err := s.nc.PublishMsg(fwd)
		s.drain.mu.RUnlock()
		if err != nil {
			s.refuse(req, id, remoteParent(hdr), schemas.Errorf(schemas.CodeWorkerBusy, "worker %s is full and could not hand the request back: %v", s.cfg.WorkerID, err))
		}
		return
	}
	s.drain.mu.RUnlock()
	// Draining: our subscription is gone and maybe nobody else is there. Learn that off the handler
	// goroutine while Shutdown still waits; afterwards do it inline (nothing else needs the handler).
	if !s.goTrack(func() { s.forwardDraining(fwd, id) }) {
		s.forwardDraining(fwd, id)
	}
}

// forwardDraining hands fwd back to the queue group and answers 503 unavailable when nobody took
// it. The NATS server reports "no responders" only to the publisher, and only when the publisher is
// subscribed to the reply subject: so subscribe to it for one round trip.
func (s *Service) forwardDraining(fwd *nats.Msg, id string) {
	unavailable := schemas.Errorf(schemas.CodeUnavailable, "worker %s is shutting down and no other worker took the request", s.cfg.WorkerID)
	fail := func() {
		s.st.countError(unavailable.Code)
		s.replyError(target{reply: fwd.Reply, id: id}, 0, unavailable)
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
