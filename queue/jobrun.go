package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/schemas"
)

// Running one job: open reads and admits the delivery, settled ends one that needs no
// generation, generate runs it in the slot it holds, conclude retries, hands back or finishes it,
// and finishJob stores the result before it acks.

// job is one delivery of a job being run.
type job struct {
	msg      jetstream.Msg
	meta     *jetstream.MsgMetadata
	t        target
	in       admitted
	log      *slog.Logger
	received time.Time
	parent   trace.SpanContext // the submit's trace context (traceparent); invalid for none
}

// heldSlot is the slot a running job holds (counted running by startJob). It is the generation's:
// it is freed as soon as the generation is over, so the next job starts while this one's result
// is stored and acked.
type heldSlot struct {
	c    *jobConsumer
	done bool
}

func (h *heldSlot) free() {
	if !h.done {
		h.done = true
		h.c.st.running.Add(-1)
		h.c.slots.release()
	}
}

// runJob runs one job that holds a slot, and frees the slot when it is done.
func (c *jobConsumer) runJob(msg jetstream.Msg) {
	slot := &heldSlot{c: c}
	defer slot.free()
	j, ok := c.open(msg)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(c.s.base)
	defer cancel()
	if c.settled(ctx, j) {
		return
	}
	// Keep the job alive while it runs, so a generation longer than AckWait is not redelivered.
	stopKeepAlive := c.keepAlive(msg)
	defer stopKeepAlive()
	if j.in.err != nil {
		c.finishJob(ctx, j, j.in.req != nil && j.in.req.Stream, outcome{err: j.in.err})
		return
	}
	o, streamed := c.generate(ctx, j)
	slot.free()
	c.conclude(ctx, j, streamed, o)
}

// open reads a delivered job: its metadata, id, target and admission. It terminates a job that
// cannot have a result (no metadata, an invalid id) and reports false then.
func (c *jobConsumer) open(msg jetstream.Msg) (*job, bool) {
	hdr := msg.Headers()
	j := &job{msg: msg, received: time.Now()}
	meta, err := msg.Metadata()
	if err != nil {
		c.s.log.Warn("jobs: message without JetStream metadata; terminated", "error", err)
		_ = msg.Term()
		c.st.terminated.Add(1)
		return nil, false
	}
	j.meta = meta
	if meta.NumDelivered > 1 {
		c.st.redelivered.Add(1)
	}
	id := hdr.Get(schemas.HeaderMsgID)
	if id == "" {
		id = c.jobs.ids.of(meta.Sequence.Stream)
	}
	requestID := cmp.Or(hdr.Get(schemas.HeaderRequestID), id)
	j.in = c.s.admit(admission{reply: hdr.Get(schemas.HeaderReplyTo), replyOptional: true, hdr: hdr, data: msg.Data()})
	j.t = target{reply: j.in.reply, id: requestID, job: id, acct: new(atomic.Pointer[string])}
	if !schemas.ValidJobID(id) {
		// Not a valid KV key: there is nowhere to put a result.
		e := schemas.Errorf(schemas.CodeInvalidRequest, "job id %q must match [A-Za-z0-9_=-]{1,128}", truncateID(id))
		c.s.log.Info("jobs: invalid job id; terminated", "request_id", requestID, "seq", meta.Sequence.Stream)
		c.s.answerRefused(j.t, msg.Data(), e)
		_ = msg.TermWithReason("invalid job id")
		c.st.terminated.Add(1)
		return nil, false
	}
	j.log = c.s.log.With("job", id, "request_id", requestID, "delivery", meta.NumDelivered)
	if j.parent = remoteParent(hdr); j.parent.IsValid() {
		j.log = j.log.With("trace_id", j.parent.TraceID().String(), "span_id", j.parent.SpanID().String())
	}
	c.s.claimSpan(j)
	return j, true
}

// settled ends a job that needs no generation: its result exists (a redelivery after the result
// was written, or the same job submitted again), the results bucket cannot be read (handed back
// with a delay, and the pull loop pauses: see readPause), or it was delivered beyond its
// attempts. It reports whether it ended the job.
func (c *jobConsumer) settled(ctx context.Context, j *job) bool {
	stored, err := c.jobs.results.Get(ctx, j.t.job)
	if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) {
		c.pause.ok()
	}
	switch {
	case err == nil:
		// Nothing to run again. A one-shot listener still gets the answer.
		j.log.Debug("jobs: result exists; acked without a generation")
		c.s.answerStored(j.t, wantsStream(j.msg.Data()), stored.Value())
		c.ack(j)
		c.st.skipped.Add(1)
		return true
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		pause := c.pause.failed()
		j.log.Warn("jobs: cannot read the results bucket; handed back, pulling paused", "error", err, "pause", pause)
		c.retry(j, 0)
		return true
	case j.meta.NumDelivered > uint64(2*c.jobs.cfg.MaxAttempts):
		// Deliveries beyond the attempts are workers that died or stalled on it: stop.
		c.finishJob(ctx, j, false, outcome{err: schemas.Errorf(schemas.CodeUpstreamError,
			"the job was delivered %d times without finishing", j.meta.NumDelivered)})
		return true
	}
	return false
}

// generate runs an admitted job's generation; streamed reports whether its events went to the
// job's Codex-Reply-To.
func (c *jobConsumer) generate(ctx context.Context, j *job) (outcome, bool) {
	r := j.in.req
	r.ID = j.t.id
	gctx, gcancel := context.WithDeadline(ctx, j.received.Add(j.in.timeout))
	defer gcancel()
	gctx, done := c.s.cancellable(gctx, r.ID)
	defer done()
	streamed := r.Stream && j.t.reply != ""
	gctx, span := c.s.startProcess(gctx, j.parent, "process job", r, j.received, j.attrs()...)
	j.t.span = span.SpanContext()
	o := c.s.execute(gctx, r, j.t, streamed, streamed)
	c.s.finish(gctx, r, o, j.received)
	endSpan(span, o.err)
	return o, streamed
}

// conclude ends a job whose generation ran: handed back when shutdown cut it off, retried after a
// retryable failure with attempts left, else finished with its outcome.
func (c *jobConsumer) conclude(ctx context.Context, j *job, streamed bool, o outcome) {
	if o.err != nil && errors.Is(context.Cause(c.s.base), errShutdown) {
		// Cut off by shutdown: another worker takes it at once.
		if streamed {
			c.s.answer(j.t, true, o)
		}
		c.release(j.msg)
		j.log.Info("jobs: handed back at shutdown")
		return
	}
	if o.err != nil && retryable(o.err) && o.events == 0 && j.meta.NumDelivered < uint64(c.jobs.cfg.MaxAttempts) {
		if wait := o.err.RetryAfter; wait <= jobMaxRetryDelay {
			j.log.Info("jobs: retryable failure; handed back", "status", o.err.Status, "code", o.err.Code)
			c.retry(j, wait)
			return
		}
	}
	c.finishJob(ctx, j, streamed, o)
}

// finishJob writes the job's result, answers its Codex-Reply-To and acks it, in that order. The
// write outlives a shutdown that cuts generations off: a finished generation is not thrown away.
func (c *jobConsumer) finishJob(ctx context.Context, j *job, streamed bool, o outcome) {
	o = c.s.fitPayload(o)
	if err := c.storeResult(ctx, j, o.body()); err != nil {
		c.unstored(j, streamed, o, err)
		return
	}
	c.s.answer(j.t, streamed, o)
	c.ack(j)
}

// storeResult writes body as the job's result, trying again before it gives up: the answer is
// in hand, and a write that fails should not cost a new generation. A write the bucket refused
// is tried resultWriteTries times in all; one that found no stream leader or timed out (the
// bucket's leader died and the cluster is electing another: seconds) is tried until
// resultWriteTimeout, the job kept alive meanwhile.
func (c *jobConsumer) storeResult(ctx context.Context, j *job, body []byte) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resultWriteTimeout)
	defer cancel()
	var err error
	for try := 0; try < resultWriteTries || transientWrite(err); try++ {
		if try > 0 && !pause(ctx, min(resultWritePause<<min(try-1, 8), resultWriteMaxPause)) {
			break
		}
		start := time.Now()
		if _, err = c.jobs.results.Put(ctx, j.t.job, body); err == nil {
			c.st.kvWrite(time.Since(start))
			if c.s.cfg.ObserveResultWrite != nil {
				c.s.cfg.ObserveResultWrite(time.Since(start))
			}
			return nil
		}
		j.log.Debug("jobs: result write failed", "try", try+1, "error", err)
	}
	return err
}

// unstored ends a job whose result could not be stored. That costs one of its attempts: with
// attempts left it is handed back to run again; after the last it is terminated (a job whose
// result can never be stored must not run forever), and its Codex-Reply-To still gets the answer.
func (c *jobConsumer) unstored(j *job, streamed bool, o outcome, err error) {
	if j.meta.NumDelivered < uint64(c.jobs.cfg.MaxAttempts) {
		j.log.Warn("jobs: cannot write the result; handed back for another attempt", "error", err)
		c.retry(j, 0)
		return
	}
	j.log.Error("jobs: cannot write the result and no attempts are left; terminated",
		"error", err, "max_attempts", c.jobs.cfg.MaxAttempts)
	c.s.answer(j.t, streamed, o)
	if err := j.msg.TermWithReason("result not stored"); err != nil {
		j.log.Warn("jobs: terminate not sent", "error", err)
	}
	c.st.terminated.Add(1)
}

// pause waits d, or until ctx is done (false then).
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ack acks the job. It does not wait for the server's confirmation: the result is stored first,
// so a lost ack costs a redelivery that finds the result and acks without a new generation.
func (c *jobConsumer) ack(j *job) {
	if err := j.msg.Ack(); err != nil {
		j.log.Warn("jobs: ack not sent", "error", err)
	}
	c.st.acked.Add(1)
}

// retry hands the job back to the consumer after at least wait (the origin's retry time),
// doubling from jobRetryBase with each delivery.
func (c *jobConsumer) retry(j *job, wait time.Duration) {
	d := jobRetryBase << min(max(j.meta.NumDelivered, 1)-1, 16)
	d = min(max(d, wait), jobMaxRetryDelay)
	if err := j.msg.NakWithDelay(d); err != nil {
		j.log.Warn("jobs: cannot hand the job back; it returns after the ack wait", "error", err)
	}
	c.st.retried.Add(1)
}

// keepAlive sends InProgress every third of the consumer's AckWait (read again as it goes, see
// consumerAckWait) until the returned func is called.
func (c *jobConsumer) keepAlive(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(finished)
		t := time.NewTimer(keepAliveEvery(c.jobs.ackWait.get()))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
				c.jobs.ackWait.refresh(ctx)
				t.Reset(keepAliveEvery(c.jobs.ackWait.get()))
			}
		}
	}()
	return func() {
		close(done)
		cancel()
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

// Storing one result: resultWriteTries writes (more while the failures are transient),
// resultWritePause after the first failure and doubling up to resultWriteMaxPause, all within
// resultWriteTimeout.
const (
	resultWriteTimeout  = 30 * time.Second
	resultWriteTries    = 3
	resultWritePause    = 200 * time.Millisecond
	resultWriteMaxPause = 2 * time.Second
)

// transientWrite reports whether a failed write may work if tried again soon: no stream answered
// (no leader, a node down), it timed out, or the connection is reconnecting.
func transientWrite(err error) bool {
	var api *jetstream.APIError
	switch {
	case err == nil:
		return false
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return true
	case errors.As(err, &api):
		return api.Code == 503 // JetStream temporarily unavailable
	}
	return false
}

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
			h := s.tracedHeader(t)
			h.Set(schemas.HeaderSeq, "1")
			if err := s.nc.PublishMsg(&nats.Msg{Subject: t.reply, Data: ev, Header: h}); err == nil {
				o.seq = 1
			}
		}
	}
	s.answer(t, streamed, o)
}
