package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// runner is one Run: the live replies, the submissions and the polls of stored results.
type runner struct {
	b   *Batch
	cl  *client.Client
	got chan struct{} // a live reply came (1-buffered: wakes the wait loop)
}

func (r *runner) run(ctx context.Context, nc *nats.Conn) error {
	inbox := nc.NewRespInbox()
	sub, err := nc.Subscribe(inbox, r.onReply)
	if err != nil {
		return fmt.Errorf("batch: subscribe %s: %w", inbox, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	toSubmit, err := r.takeStored(ctx)
	if err != nil {
		return err
	}
	submitErr := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait() // the submissions end with ctx or by themselves
	wg.Go(func() { submitErr <- r.submit(ctx, toSubmit, inbox) })
	return r.wait(ctx, submitErr)
}

// onReply records a live reply to the batch's inbox.
func (r *runner) onReply(m *nats.Msg) {
	l := r.b.byID[m.Header.Get(schemas.HeaderJobID)]
	if l == nil {
		return
	}
	if e, ok := schemas.ResultError(m.Data); ok {
		r.b.record(l, nil, e)
	} else {
		r.b.record(l, &client.Reply{Response: m.Data, RequestID: m.Header.Get(schemas.HeaderRequestID)}, nil)
	}
	r.wake()
}

// wake tells the wait loop that a job has its result.
func (r *runner) wake() {
	select {
	case r.got <- struct{}{}:
	default:
	}
}

// takeStored writes the results the pool already has, without a new submission, and returns
// the lines still to submit.
func (r *runner) takeStored(ctx context.Context) ([]*line, error) {
	var toSubmit []*line
	for _, l := range r.b.pending {
		res, err := r.cl.Result(ctx, l.id)
		switch {
		case err == nil:
			r.b.record(l, res, nil)
		case errors.Is(err, client.ErrNoResult):
			toSubmit = append(toSubmit, l)
		case isJobError(err):
			r.b.record(l, nil, err)
		default:
			return nil, fmt.Errorf("batch: %w", err)
		}
	}
	return toSubmit, nil
}

// wait returns when every job has a result, the submissions failed or ctx ended; it polls the
// stored results once everything is submitted.
func (r *runner) wait(ctx context.Context, submitErr <-chan error) error {
	tick := time.NewTicker(r.b.cfg.Poll)
	defer tick.Stop()
	submitted := false
	for r.b.remaining() > 0 {
		select {
		case <-r.got:
		case err := <-submitErr:
			if err != nil {
				return fmt.Errorf("batch: %w", err)
			}
			submitted = true
		case <-tick.C:
			if submitted {
				r.pollStored(ctx)
			}
		case <-ctx.Done():
			return &IncompleteError{Remaining: r.b.remaining(), Total: len(r.b.byID), Err: ctx.Err()}
		}
	}
	return nil
}

// submit publishes every line as a job, a few at a time. A line the pool refuses to take (see
// refusal) gets that as its result; any other failure to submit ends the run.
func (r *runner) submit(ctx context.Context, lines []*line, inbox string) error {
	const workers = 8
	next := atomic.Int64{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(lines) || ctx.Err() != nil {
					return
				}
				l := lines[i]
				_, err := r.cl.Submit(ctx, l.body, client.SubmitOptions{ID: l.id, ReplyTo: inbox, Timeout: r.b.cfg.JobTimeout})
				if e := refusal(err); e != nil {
					r.b.record(l, nil, e)
					r.wake()
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("line %d: %w", l.n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// pollStored looks up the stored results of jobs whose live reply has not come (it is best
// effort: a job deduplicated against an earlier submission answers that submission's inbox).
func (r *runner) pollStored(ctx context.Context) {
	const perPoll = 500
	n := 0
	for _, l := range r.b.pending { // not byID: the lines OUT had are done
		if n >= perPoll || ctx.Err() != nil {
			return
		}
		if r.b.isWritten(l.id) {
			continue
		}
		n++
		res, err := r.cl.Result(ctx, l.id)
		switch {
		case err == nil:
			r.b.record(l, res, nil)
		case isJobError(err):
			r.b.record(l, nil, err)
		}
	}
}

// refusal is the error of a line the pool refused to take: larger than the NATS server carries
// (max_payload), or refused by the jobs stream (a 4xx such as its maximum message size). It is
// nil for every other err: those are not the line's fault, and end the run.
func refusal(err error) *schemas.Error {
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nats.ErrMaxPayload):
		return schemas.Errorf(schemas.CodeRequestTooLarge, "batch: the line is larger than the NATS server's max_payload; not submitted")
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return schemas.Errorf(schemas.CodeRequestTooLarge, "batch: the jobs stream refused the line: %s", apiErr.Description)
	case errors.As(err, &apiErr) && apiErr.Code >= 400 && apiErr.Code < 500:
		return schemas.Errorf(schemas.CodeInvalidRequest, "batch: the jobs stream refused the line: %s", apiErr.Description)
	}
	return nil
}
