package queue

import (
	"context"
	"errors"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
)

// errStreamClosed is returned by emit once Generate has returned.
var errStreamClosed = errors.New("queue: emit after the generation returned")

// errGeneratorPanic is the error of a generation whose Generator panicked.
var errGeneratorPanic = errors.New("queue: the generator panicked")

// run executes one generation in its own goroutine and answers on reply.
func (s *Service) run(r *schemas.Request, reply string, deadline, received time.Time) {
	s.st.started.Add(1)
	s.st.inflight.Add(1)
	ctx, cancel := context.WithDeadline(s.base, deadline)
	defer cancel()
	// Attributes are added per line, not with log.With: most generations log nothing.
	log := s.log

	var (
		e       *schemas.Error
		payload []byte
		seq     int
	)
	if r.Stream {
		st := &stream{s: s, reply: reply, id: r.ID}
		_, err := s.generate(ctx, r, st.emit)
		seq = st.close()
		if err != nil {
			e = asError(ctx, err)
		}
	} else {
		var err error
		payload, err = s.generate(ctx, r, nil)
		switch {
		case err != nil:
			e = asError(ctx, err)
		case len(payload) == 0:
			e = schemas.Errorf(schemas.CodeUpstreamError, "the generation returned an empty reply")
		}
	}

	// Count and free the slot before the last message goes out, so whoever got the reply sees
	// final stats and a free slot.
	took := time.Since(received)
	s.st.latencyNS.Add(int64(took))
	if e != nil {
		s.st.failed.Add(1)
		s.st.countError(e.Code)
		log.Info("generation failed", "request_id", r.ID, "stream", r.Stream, "status", e.Status, "code", e.Code, "error", e.Message, "duration", took)
	} else {
		s.st.completed.Add(1)
		log.Debug("generation completed", "request_id", r.ID, "stream", r.Stream, "duration", took)
	}
	s.st.inflight.Add(-1)
	<-s.slot

	switch {
	case r.Stream:
		if e != nil {
			s.replyError(reply, r.ID, seq+1, e)
		}
		// The end-of-stream sentinel: empty payload, no headers, always last.
		if err := s.nc.Publish(reply, nil); err != nil {
			log.Warn("cannot send end-of-stream sentinel", "request_id", r.ID, "error", err)
		}
	case e != nil:
		s.replyError(reply, r.ID, 0, e)
	default:
		m := &nats.Msg{Subject: reply, Data: payload, Header: nats.Header{
			schemas.HeaderRequestID: {r.ID},
			schemas.HeaderWorker:    {s.cfg.WorkerID},
		}}
		if err := s.nc.PublishMsg(m); err != nil {
			log.Warn("cannot send reply", "request_id", r.ID, "error", err)
		}
	}
}

// generate calls the Generator; a panic becomes an error (502) instead of taking the worker down.
func (s *Service) generate(ctx context.Context, r *schemas.Request, emit func([]byte) error) (payload []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("generator panicked", "request_id", r.ID, "panic", v, "stack", string(debug.Stack()))
			payload, err = nil, errGeneratorPanic // the value stays in the log: it may hold anything
		}
	}()
	return s.gen.Generate(ctx, r, emit)
}

// stream publishes the events of one streamed generation, numbering them with Codex-Seq.
type stream struct {
	s     *Service
	reply string
	id    string

	mu     sync.Mutex
	seq    int
	closed bool
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
	st.seq++
	m := &nats.Msg{Subject: st.reply, Data: event, Header: nats.Header{
		schemas.HeaderSeq:       {strconv.Itoa(st.seq)},
		schemas.HeaderRequestID: {st.id},
		schemas.HeaderWorker:    {st.s.cfg.WorkerID},
	}}
	if err := st.s.nc.PublishMsg(m); err != nil {
		return err
	}
	return nil
}

// close ends emitting and returns the last Codex-Seq used.
func (st *stream) close() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	return st.seq
}
