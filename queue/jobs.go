package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/schemas"
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

// maxPullBatch bounds the jobs one pull asks for when several slots are free.
const maxPullBatch = 32

// jobConsumer pulls durable jobs into the Service's free slots and runs them. start begins its
// pull loop, halt ends it, wait waits for it; the jobs it started are the Service's goroutines.
type jobConsumer struct {
	s     *Service
	jobs  *Jobs
	slots *slots
	st    jobCounters
	pause readPause
	stop  chan struct{} // closed by halt: the pull loop stops
	done  chan struct{} // closed when the pull loop has returned
}

func newJobConsumer(s *Service, j *Jobs) *jobConsumer {
	return &jobConsumer{s: s, jobs: j, slots: s.slots, pause: readPause{base: j.cfg.ReadPause, next: j.cfg.ReadPause},
		stop: make(chan struct{}), done: make(chan struct{})}
}

func (c *jobConsumer) start() {
	go func() {
		defer close(c.done)
		c.pull()
	}()
	cfg := c.jobs.cfg
	c.s.log.Info("consuming durable jobs", "stream", cfg.Stream, "consumer", schemas.JobsConsumer,
		"bucket", cfg.Bucket, "ack_wait", c.jobs.ackWait.get(), "max_attempts", cfg.MaxAttempts)
}

// halt stops the pull loop; a job that arrives after that is handed back at once.
func (c *jobConsumer) halt() { close(c.stop) }

// wait waits until the pull loop has returned (at most one FetchWait after halt).
func (c *jobConsumer) wait() { <-c.done }

// pull is the pull loop: it takes a free slot, then asks for one job (waiting up to FetchWait
// for one). When more slots are free and the last pull found jobs waiting, it asks for as many
// jobs as there are free slots, without waiting: a busy backlog costs one pull request per batch,
// and a slot is never reserved for a job that is not there. While the results bucket cannot be
// read it pulls nothing (see readPause). It ends when stop is closed.
func (c *jobConsumer) pull() {
	backlog := false
	for {
		if !c.pause.wait(c.stop) {
			return
		}
		if backlog {
			got, ok := c.pullBacklog()
			if !ok {
				return
			}
			if got > 0 {
				continue
			}
			backlog = false
		}
		if !c.slots.reserve(c.stop) {
			return
		}
		started, ok := c.pullOne()
		if !ok {
			return
		}
		backlog = started
	}
}

// pullBacklog takes one slot (waiting for it) and every other free one, up to maxPullBatch, and
// fills them with jobs waiting now; it returns how many it started, or false when stop closed.
func (c *jobConsumer) pullBacklog() (int, bool) {
	if !c.slots.acquireWait(c.stop) {
		return 0, false
	}
	n := 1
	for n < maxPullBatch && c.slots.tryAcquire() {
		n++
	}
	got := c.pullBatch(n)
	for range n - got {
		c.slots.release()
	}
	return got, true
}

// pullOne waits for one job in the slot reserve took and starts it. started reports that it
// did; ok is false when stop closed.
func (c *jobConsumer) pullOne() (started, ok bool) {
	msg, stolen, err := c.waitForJob()
	if stolen {
		// A request took the reserved slot: it is the request's now. A job that arrived in the
		// same instant goes back to the stream for the next free slot.
		if msg != nil {
			c.release(msg)
		}
		return false, true
	}
	if c.stopping(msg) {
		return false, false
	}
	if err != nil {
		c.slots.release()
		if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			c.s.log.Warn("jobs: pull failed; retrying", "error", err)
			select {
			case <-c.stop:
				return false, false
			case <-time.After(c.jobs.cfg.FetchWait):
			}
		}
		return false, true
	}
	c.startJob(msg)
	return true, true
}

// waitForJob waits up to FetchWait for one job in the slot reserve took. stolen reports that a
// request took the slot meanwhile (the caller no longer holds it).
func (c *jobConsumer) waitForJob() (jetstream.Msg, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.jobs.cfg.FetchWait)
	defer cancel()
	if c.slots.beginWait(cancel) {
		// Taken before the wait could be cancelled: do not ask at all. (A pull request sent with
		// a cancelled context still reaches the server, and a job it delivers before the
		// unsubscribe lands in a buffer nobody reads, to come back only after AckWait. A
		// cancelled wait has the same hazard in the instant a job arrives: rare, and the job
		// is late, not lost.)
		return nil, true, nil
	}
	msg, err := c.jobs.consumer.Next(jetstream.FetchContext(ctx))
	return msg, c.slots.endWait(), err
}

// pullBatch asks for up to n jobs that are waiting now and starts each in one of the n slots the
// caller holds; it returns how many it started (their slots are theirs now).
func (c *jobConsumer) pullBatch(n int) int {
	batch, err := c.jobs.consumer.FetchNoWait(n)
	if err != nil {
		return 0
	}
	got := 0
	for msg := range batch.Messages() {
		select {
		case <-c.stop:
			c.release(msg)
			continue
		default:
		}
		got++
		c.startJob(msg)
	}
	return got
}

// stopping reports whether stop is closed, handing msg back and freeing the caller's slot if so.
func (c *jobConsumer) stopping(msg jetstream.Msg) bool {
	select {
	case <-c.stop:
		if msg != nil {
			c.release(msg)
		}
		c.slots.release()
		return true
	default:
		return false
	}
}

// release hands msg back to the stream at once, for another worker (or a later pull).
func (c *jobConsumer) release(msg jetstream.Msg) {
	_ = msg.Nak()
	c.st.released.Add(1)
}

// startJob runs msg in its own goroutine, in the slot the caller holds.
func (c *jobConsumer) startJob(msg jetstream.Msg) {
	c.st.pulled.Add(1)
	c.st.running.Add(1)
	if !c.s.goTrack(func() { c.runJob(msg) }) {
		c.st.running.Add(-1)
		c.release(msg)
		c.slots.release()
	}
}

// readPause is the pull loop's backoff from an unreadable results bucket (an outage, a bucket
// deleted or without a leader): every job pulled meanwhile would only be handed back, so instead
// of cycling through the backlog the loop waits, doubling the wait with each failed read up to
// MaxJobsReadPause; a read that works starts again from base.
type readPause struct {
	base  time.Duration
	mu    sync.Mutex
	until time.Time     // no pull before this
	next  time.Duration // the next failed read's pause
}

// failed starts a pause after a failed read and returns its length; reads that fail during a
// pause (jobs pulled before it) do not lengthen it.
func (p *readPause) failed() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Before(p.until) {
		return p.until.Sub(now)
	}
	d := p.next
	p.until = now.Add(d)
	p.next = min(2*d, MaxJobsReadPause)
	return d
}

// ok ends the backoff: the bucket was read.
func (p *readPause) ok() {
	p.mu.Lock()
	p.next = p.base
	p.mu.Unlock()
}

// wait waits out the pause, if any; it reports false when stop closed meanwhile.
func (p *readPause) wait(stop <-chan struct{}) bool {
	p.mu.Lock()
	d := time.Until(p.until)
	p.mu.Unlock()
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// jobCounters are the atomically updated schemas.JobStats fields.
type jobCounters struct {
	pulled, acked, skipped, retried, terminated, redelivered, released, kvWrites atomic.Uint64
	running, kvWriteNS                                                           atomic.Int64
}

func (c *jobCounters) kvWrite(d time.Duration) {
	c.kvWrites.Add(1)
	c.kvWriteNS.Add(int64(d))
}

func (c *jobCounters) snapshot() schemas.JobStats {
	st := schemas.JobStats{
		Pulled: c.pulled.Load(), Running: c.running.Load(), Acked: c.acked.Load(), Skipped: c.skipped.Load(),
		Retried: c.retried.Load(), Terminated: c.terminated.Load(), Redelivered: c.redelivered.Load(),
		Released: c.released.Load(), KVWrites: c.kvWrites.Load(), KVWriteSum: time.Duration(c.kvWriteNS.Load()),
	}
	if st.KVWrites > 0 {
		st.KVWriteAvg = st.KVWriteSum / time.Duration(st.KVWrites)
	}
	return st
}
