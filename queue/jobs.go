package queue

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/validate"
)

// Durable jobs: every worker pulls from one durable consumer, one job per free in-flight slot, so
// a worker never holds a job it is not working on and jobs and requests share MaxInflight. A job
// is kept alive with InProgress while it runs, its result is written to the results bucket, and
// only then is it acked: a worker that dies loses nothing, its jobs come back after AckWait.

// Backoff of a job that failed with a retryable error: doubling from jobRetryBase, at least the
// origin's retry time. A retry time longer than jobMaxRetryDelay ends the job with the error
// instead of parking it for hours.
const (
	jobRetryBase     = time.Second
	jobMaxRetryDelay = time.Hour
)

// JobStats are the job counters, published in the endpoint's stats data and as metrics.
type JobStats struct {
	Pulled      uint64        `json:"pulled"`      // jobs received from the consumer
	Running     int64         `json:"running"`     // jobs running now (each holds a slot)
	Acked       uint64        `json:"acked"`       // finished: result written, then acked
	Skipped     uint64        `json:"skipped"`     // acked without a generation: the result existed
	Retried     uint64        `json:"retried"`     // handed back with a delay after a retryable error
	Terminated  uint64        `json:"terminated"`  // ended without a result (an invalid job id)
	Redelivered uint64        `json:"redelivered"` // received with a delivery count above 1
	Released    uint64        `json:"released"`    // handed back at once (shutdown)
	KVWrites    uint64        `json:"kv_writes"`
	KVWriteSum  time.Duration `json:"kv_write_sum_ns"`
	KVWriteAvg  time.Duration `json:"kv_write_avg_ns"`
}

// maxPullBatch bounds the jobs one pull asks for when several slots are free.
const maxPullBatch = 32

// pullJobs is the pull loop: it takes a free slot, then asks for one job (waiting up to
// FetchWait for one). When more slots are free and the last pull found jobs waiting, it asks for
// as many jobs as there are free slots, without waiting: a busy backlog costs one pull request per
// batch, and a slot is never reserved for a job that is not there. It ends when stop is closed; a
// job that arrives after that is handed back at once.
func (s *Service) pullJobs(stop <-chan struct{}) {
	backlog := false
	for {
		if backlog {
			select {
			case s.slot <- struct{}{}:
			case <-stop:
				return
			}
			n := 1
			for n < maxPullBatch && s.tryAcquire() {
				n++
			}
			got := s.pullBatch(n, stop)
			for range n - got {
				s.release()
			}
			if got > 0 {
				continue
			}
			backlog = false
		}
		if !s.reserve(stop) {
			return
		}
		msg, stolen, err := s.waitForJob()
		if stolen {
			// A request took the reserved slot: it is the request's now. A job that arrived in
			// the same instant goes back to the stream for the next free slot.
			if msg != nil {
				_ = msg.Nak()
				s.jst.released.Add(1)
			}
			continue
		}
		if s.stopping(stop, msg) {
			return
		}
		if err != nil {
			s.release()
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
				s.log.Warn("jobs: pull failed; retrying", "error", err)
				select {
				case <-stop:
					return
				case <-time.After(s.jobs.cfg.FetchWait):
				}
			}
			continue
		}
		s.startJob(msg)
		backlog = true
	}
}

// Pull waits and requests share one slot: while the pull loop waits for a job in the slot it
// reserved, a request that finds no other slot free takes that one (stealPullSlot) and the wait
// is cancelled, so an idle worker with jobs on still serves MaxInflight requests.
const (
	pullIdle int32 = iota
	pullWaiting
	pullStolen
)

// reserve takes a slot for the pull loop to wait for a job in, waiting until one is free, and
// marks it stealable in the same step (under pullMu, as acquire looks). It reports false when
// stop closes first.
func (s *Service) reserve(stop <-chan struct{}) bool {
	for {
		s.pullMu.Lock()
		ok := s.tryAcquire()
		if ok {
			s.pullState.Store(pullWaiting)
		}
		s.pullMu.Unlock()
		if ok {
			return true
		}
		select {
		case <-s.freed:
		case <-stop:
			return false
		}
	}
}

// waitForJob waits up to FetchWait for one job in the slot reserve took. stolen reports that a
// request took the slot meanwhile (the caller no longer holds it).
func (s *Service) waitForJob() (jetstream.Msg, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.jobs.cfg.FetchWait)
	defer cancel()
	s.pullCancel.Store(&cancel)
	if s.pullState.Load() == pullStolen {
		// Taken before the wait could be cancelled: do not ask at all. (A pull request sent with
		// a cancelled context still reaches the server, and a job it delivers before the
		// unsubscribe lands in a buffer nobody reads, to come back only after AckWait. A
		// cancelled wait has the same hazard in the instant a job arrives: rare, and the job
		// is late, not lost.)
		s.pullState.Store(pullIdle)
		return nil, true, nil
	}
	msg, err := s.jobs.consumer.Next(jetstream.FetchContext(ctx))
	if !s.pullState.CompareAndSwap(pullWaiting, pullIdle) {
		s.pullState.Store(pullIdle)
		return msg, true, err
	}
	return msg, false, err
}

// stealPullSlot takes the slot the pull loop holds while it waits for a job, if it does.
func (s *Service) stealPullSlot() bool {
	if s.jobs == nil || !s.pullState.CompareAndSwap(pullWaiting, pullStolen) {
		return false
	}
	if c := s.pullCancel.Load(); c != nil {
		(*c)()
	}
	return true
}

// pullBatch asks for up to n jobs that are waiting now and starts each in one of the n slots the
// caller holds; it returns how many it started (their slots are theirs now).
func (s *Service) pullBatch(n int, stop <-chan struct{}) int {
	batch, err := s.jobs.consumer.FetchNoWait(n)
	if err != nil {
		return 0
	}
	got := 0
	for msg := range batch.Messages() {
		select {
		case <-stop:
			_ = msg.Nak()
			s.jst.released.Add(1)
			continue
		default:
		}
		got++
		s.startJob(msg)
	}
	return got
}

// stopping reports whether stop is closed, handing msg back and freeing the caller's slot if so.
func (s *Service) stopping(stop <-chan struct{}, msg jetstream.Msg) bool {
	select {
	case <-stop:
		if msg != nil {
			_ = msg.Nak()
			s.jst.released.Add(1)
		}
		s.release()
		return true
	default:
		return false
	}
}

// startJob runs msg in its own goroutine, in the slot the caller holds.
func (s *Service) startJob(msg jetstream.Msg) {
	s.jst.pulled.Add(1)
	s.jst.running.Add(1)
	if !s.goTrack(func() { s.runJob(msg) }) {
		s.jst.running.Add(-1)
		_ = msg.Nak()
		s.jst.released.Add(1)
		s.release()
	}
}

// runJob runs one job that holds a slot, and frees the slot when it is done.
func (s *Service) runJob(msg jetstream.Msg) {
	// The slot (counted running by startJob) is the generation's: it is freed as soon as the
	// generation is over, so the next job starts while this one's result is stored and acked.
	held := true
	free := func() {
		if held {
			held = false
			s.jst.running.Add(-1)
			s.release()
		}
	}
	defer free()
	received := time.Now()
	hdr := msg.Headers()
	meta, err := msg.Metadata()
	if err != nil {
		s.log.Warn("jobs: message without JetStream metadata; terminated", "error", err)
		_ = msg.Term()
		s.jst.terminated.Add(1)
		return
	}
	if meta.NumDelivered > 1 {
		s.jst.redelivered.Add(1)
	}
	crashLoop := meta.NumDelivered > uint64(2*s.jobs.cfg.MaxAttempts)
	id := hdr.Get(schemas.HeaderMsgID)
	if id == "" {
		id = strconv.FormatUint(meta.Sequence.Stream, 10)
	}
	requestID := hdr.Get(schemas.HeaderRequestID)
	if requestID == "" {
		requestID = id
	}
	t := target{reply: hdr.Get(schemas.HeaderReplyTo), id: requestID, job: id}
	if !schemas.ValidJobID(id) {
		// Not a valid KV key: there is nowhere to put a result.
		e := schemas.Errorf(schemas.CodeInvalidRequest, "job id %q must match [A-Za-z0-9_=-]{1,128}", truncateID(id))
		s.log.Info("jobs: invalid job id; terminated", "request_id", requestID, "seq", meta.Sequence.Stream)
		s.answerRefused(t, msg.Data(), e)
		_ = msg.TermWithReason("invalid job id")
		s.jst.terminated.Add(1)
		return
	}
	log := s.log.With("job", id, "request_id", requestID, "delivery", meta.NumDelivered)

	ctx, cancel := context.WithCancel(s.base)
	defer cancel()
	if stored, err := s.jobs.results.Get(ctx, id); err == nil {
		// A redelivery after the result was written (the ack was lost), or the same job
		// submitted again: nothing to run again. A one-shot listener still gets the answer.
		log.Debug("jobs: result exists; acked without a generation")
		s.answerStored(t, wantsStream(msg.Data()), stored.Value())
		s.ack(ctx, msg, log)
		s.jst.skipped.Add(1)
		return
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		log.Warn("jobs: cannot read the results bucket; will retry", "error", err)
		s.retry(msg, 0, meta.NumDelivered, log)
		return
	}

	if crashLoop {
		// Deliveries beyond the attempts are workers that died or stalled on it: stop.
		s.finishJob(ctx, msg, t, false, outcome{err: schemas.Errorf(schemas.CodeUpstreamError,
			"the job was delivered %d times without finishing", meta.NumDelivered)}, log)
		return
	}

	// Keep the job alive while it runs, so a generation longer than AckWait is not redelivered.
	stopKeepAlive := s.keepAlive(msg)
	defer stopKeepAlive()

	timeout := s.cfg.RequestTimeout
	if v := hdr.Get(schemas.HeaderTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			s.finishJob(ctx, msg, t, false, outcome{err: schemas.Errorf(schemas.CodeInvalidRequest,
				"%s header %q is not a positive Go duration (e.g. 90s)", schemas.HeaderTimeout, v)}, log)
			return
		}
		timeout = min(timeout, d)
	}
	if n := len(msg.Data()); n > s.cfg.MaxRequestBytes {
		s.finishJob(ctx, msg, t, false, outcome{err: schemas.Errorf(schemas.CodeRequestTooLarge,
			"request is %d bytes, more than the %d this worker accepts", n, s.cfg.MaxRequestBytes)}, log)
		return
	}
	r, err := validate.Request(msg.Data())
	if err != nil {
		se, ok := schemas.AsError(err)
		if !ok {
			se = schemas.Errorf(schemas.CodeInvalidRequest, "%v", err)
		}
		s.finishJob(ctx, msg, t, r != nil && r.Stream, outcome{err: se}, log)
		return
	}
	r.ID = requestID

	gctx, gcancel := context.WithDeadline(ctx, received.Add(timeout))
	gctx, done := s.cancellable(gctx, requestID)
	streamed := r.Stream && t.reply != ""
	o := s.execute(gctx, r, t, streamed, streamed)
	done()
	gcancel()
	s.finish(r, o, received)
	free()

	if o.err != nil && context.Cause(s.base) != nil && errors.Is(context.Cause(s.base), errShutdown) {
		// Cut off by shutdown: another worker takes it at once.
		if streamed {
			s.answer(t, true, o)
		}
		_ = msg.Nak()
		s.jst.released.Add(1)
		log.Info("jobs: handed back at shutdown")
		return
	}
	if o.err != nil && retryable(o.err) && o.events == 0 && meta.NumDelivered < uint64(s.jobs.cfg.MaxAttempts) {
		if wait := o.err.RetryAfter; wait <= jobMaxRetryDelay {
			log.Info("jobs: retryable failure; handed back", "status", o.err.Status, "code", o.err.Code)
			s.retry(msg, wait, meta.NumDelivered, log)
			return
		}
	}
	s.finishJob(ctx, msg, t, streamed, o, log)
}

// finishJob writes the job's result, answers its Codex-Reply-To and acks it, in that order. The
// write outlives a shutdown that cuts generations off: a finished generation is not thrown away.
func (s *Service) finishJob(ctx context.Context, msg jetstream.Msg, t target, streamed bool, o outcome, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resultWriteTimeout)
	defer cancel()
	o = s.fitPayload(o)
	start := time.Now()
	if _, err := s.jobs.results.Put(ctx, t.job, o.body()); err != nil {
		// Without the result the job must run again: do not ack it.
		log.Warn("jobs: cannot write the result; handing the job back", "error", err)
		_ = msg.NakWithDelay(jobRetryBase)
		s.jst.retried.Add(1)
		return
	}
	s.jst.kvWrite(time.Since(start))
	if s.cfg.ObserveResultWrite != nil {
		s.cfg.ObserveResultWrite(time.Since(start))
	}
	s.answer(t, streamed, o)
	s.ack(ctx, msg, log)
}

// ack acks msg. It does not wait for the server's confirmation: the result is stored first, so a
// lost ack costs a redelivery that finds the result and acks without a new generation.
func (s *Service) ack(_ context.Context, msg jetstream.Msg, log *slog.Logger) {
	if err := msg.Ack(); err != nil {
		log.Warn("jobs: ack not sent", "error", err)
	}
	s.jst.acked.Add(1)
}

// retry hands msg back to the consumer after at least wait (the origin's retry time), doubling
// from jobRetryBase with each delivery.
func (s *Service) retry(msg jetstream.Msg, wait time.Duration, delivered uint64, log *slog.Logger) {
	d := jobRetryBase << min(max(delivered, 1)-1, 16)
	d = min(max(d, wait), jobMaxRetryDelay)
	if err := msg.NakWithDelay(d); err != nil {
		log.Warn("jobs: cannot hand the job back; it returns after the ack wait", "error", err)
	}
	s.jst.retried.Add(1)
}

// keepAlive sends InProgress every third of AckWait until the returned func is called.
func (s *Service) keepAlive(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(max(s.jobs.cfg.AckWait/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// answerRefused sends a refusal to a job's Codex-Reply-To (with the sentinel when the payload asks
// for a stream), as codex.generate does.
func (s *Service) answerRefused(t target, payload []byte, e *schemas.Error) {
	if t.reply == "" {
		return
	}
	s.replyError(t, 0, e)
	s.endRefusedStream(t.reply, t.id, payload)
}

// retryable reports whether a job that failed with e may succeed when run again: 403, 429, 5xx
// and 504 may; 400, 401 and 413 never do.
func retryable(e *schemas.Error) bool {
	switch e.Code {
	case schemas.CodeInvalidRequest, schemas.CodeRequestTooLarge, schemas.CodeUpstreamUnauthorized:
		return false
	}
	return e.Status == 403 || e.Status == 429 || e.Status >= 500
}

func truncateID(id string) string {
	if len(id) > 64 {
		return id[:64] + "..."
	}
	return id
}

// jobCounters are the atomically updated JobStats fields.
type jobCounters struct {
	pulled, acked, skipped, retried, terminated, redelivered, released, kvWrites atomic.Uint64
	running, kvWriteNS                                                           atomic.Int64
}

func (c *jobCounters) kvWrite(d time.Duration) {
	c.kvWrites.Add(1)
	c.kvWriteNS.Add(int64(d))
}

func (c *jobCounters) snapshot() JobStats {
	st := JobStats{
		Pulled: c.pulled.Load(), Running: c.running.Load(), Acked: c.acked.Load(), Skipped: c.skipped.Load(),
		Retried: c.retried.Load(), Terminated: c.terminated.Load(), Redelivered: c.redelivered.Load(),
		Released: c.released.Load(), KVWrites: c.kvWrites.Load(), KVWriteSum: time.Duration(c.kvWriteNS.Load()),
	}
	if st.KVWrites > 0 {
		st.KVWriteAvg = st.KVWriteSum / time.Duration(st.KVWrites)
	}
	return st
}

// storedOutcome is the outcome a stored result stands for.
func storedOutcome(body []byte) outcome {
	if e, ok := schemas.ResultError(body); ok {
		return outcome{err: e}
	}
	return outcome{payload: body}
}

// wantsStream reports whether a request payload asks for "stream": true.
func wantsStream(payload []byte) bool {
	var r struct {
		Stream any `json:"stream"`
	}
	return json.Unmarshal(payload, &r) == nil && r.Stream == true
}

// resultWriteTimeout bounds storing one result.
const resultWriteTimeout = 30 * time.Second

// payloadHeadroom is what a KV write or a reply adds to a body (subject, headers).
const payloadHeadroom = 1024

// fitPayload replaces a reply too large for the NATS server (max_payload) with a 502 saying so:
// it could be neither stored nor sent, and generating it again would not make it smaller.
func (s *Service) fitPayload(o outcome) outcome {
	limit := int(s.nc.MaxPayload()) - payloadHeadroom
	if o.err != nil || len(o.payload) <= limit {
		return o
	}
	s.log.Warn("reply larger than the NATS server's max payload", "bytes", len(o.payload), "max_payload", s.nc.MaxPayload())
	return outcome{err: schemas.Errorf(schemas.CodeUpstreamError,
		"the response is %d bytes, more than the %d the NATS server carries (its max_payload)", len(o.payload), limit), seq: o.seq, events: o.events}
}

// answerStored answers a Codex-Reply-To from a stored result: one-shot, the stored body; streamed,
// a response.completed event carrying it (the events themselves are gone) or the error, then the
// sentinel, so a "request many" listener ends.
func (s *Service) answerStored(t target, streamed bool, body []byte) {
	if t.reply == "" {
		return
	}
	o := storedOutcome(body)
	if streamed && o.err == nil {
		ev, err := json.Marshal(struct {
			Type     string          `json:"type"`
			Response json.RawMessage `json:"response"`
		}{"response.completed", body})
		if err == nil {
			h := s.header(t)
			h.Set(schemas.HeaderSeq, "1")
			if err := s.nc.PublishMsg(&nats.Msg{Subject: t.reply, Data: ev, Header: h}); err == nil {
				o.seq = 1
			}
		}
	}
	s.answer(t, streamed, o)
}
