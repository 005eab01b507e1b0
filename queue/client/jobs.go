package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"

	"github.com/codexpool/codexpool/schemas"
)

// ErrNoResult is returned by Result for a job that has no result (yet, or any more: results
// expire after the bucket's TTL).
var ErrNoResult = errors.New("client: no result for this job")

// SubmitOptions are the optional parts of a durable job.
type SubmitOptions struct {
	// ID is the job id (Nats-Msg-Id): the stream drops a second job with the same id within its
	// duplicate window, and the result is stored under it. It must match [A-Za-z0-9_=-]{1,128}.
	// Empty: Submit makes a random 128-bit id (base64url), which nobody else can guess.
	ID string
	// ReplyTo is a core subject that also gets the reply (or, for "stream": true, the events, the
	// error and the sentinel), as codex.generate would send them. Best effort: the stored result is
	// the source of truth.
	ReplyTo string
	// Timeout bounds the generation (Codex-Timeout); 0 = the worker's limit.
	Timeout time.Duration
	// RequestID is the Codex-Request-Id used in logs and replies; default the job id.
	RequestID string
	// Header holds more headers for the job (e.g. the session headers); the ones above win.
	Header nats.Header
}

// Job is a stored job.
type Job struct {
	ID        string // its id: SubmitOptions.ID, or the random one Submit made
	Sequence  uint64 // its stream sequence
	Duplicate bool   // the stream already had a job with this id (within the duplicate window)
}

// jetStream returns the JetStream context and the results bucket, made on first use.
func (c *Client) jetStream(ctx context.Context) (jetstream.JetStream, jetstream.KeyValue, error) {
	c.jsOnce.Lock()
	defer c.jsOnce.Unlock()
	if c.js == nil {
		js, err := jetstream.New(c.nc)
		if err != nil {
			return nil, nil, fmt.Errorf("client: jetstream: %w", err)
		}
		c.js = js
	}
	if c.kv == nil {
		kv, err := c.js.KeyValue(ctx, c.opts.ResultsBucket)
		if err != nil {
			if errors.Is(err, jetstream.ErrBucketNotFound) {
				return c.js, nil, fmt.Errorf("client: results bucket %s does not exist (has a worker with jobs started?): %w", c.opts.ResultsBucket, err)
			}
			return c.js, nil, fmt.Errorf("client: results bucket %s: %w", c.opts.ResultsBucket, err)
		}
		c.kv = kv
	}
	return c.js, c.kv, nil
}

// jsState is the lazily made JetStream part of a Client.
type jsState struct {
	jsOnce sync.Mutex
	js     jetstream.JetStream
	kv     jetstream.KeyValue
}

// Submit stores req (a Responses API create body) as a durable job and returns once the stream
// has it (its PubAck). The job runs when a worker has a free slot; read its result with Result or
// Wait.
func (c *Client) Submit(ctx context.Context, req []byte, opts SubmitOptions) (Job, error) {
	if opts.ID != "" && !schemas.ValidJobID(opts.ID) {
		return Job{}, fmt.Errorf("client: job id %q must match [A-Za-z0-9_=-]{1,128}", opts.ID)
	}
	js, err := c.jetStreamOnly()
	if err != nil {
		return Job{}, err
	}
	id := opts.ID
	if id == "" {
		// An id nobody can guess, so no other client can read or pre-seed this job's result.
		id = newJobID()
	}
	m := &nats.Msg{Subject: schemas.SubmitSubject(c.opts.JobsSubject), Data: req, Header: cloneHeader(opts.Header)}
	ctx, span := startRequest(ctx, "submit", m.Subject, cmp.Or(opts.RequestID, id), trace.SpanKindProducer)
	span.SetAttributes(attribute.String("codexpool.job", id))
	tracing.InjectNATS(ctx, m.Header)
	m.Header.Set(schemas.HeaderMsgID, id)
	if opts.ReplyTo != "" {
		m.Header.Set(schemas.HeaderReplyTo, opts.ReplyTo)
	}
	if opts.Timeout > 0 {
		m.Header.Set(schemas.HeaderTimeout, opts.Timeout.String())
	}
	if opts.RequestID != "" {
		m.Header.Set(schemas.HeaderRequestID, opts.RequestID)
	}
	ack, err := js.PublishMsg(ctx, m)
	endRequest(span, nil, err)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			return Job{}, fmt.Errorf("client: no jobs stream captures %s (has a worker with jobs started?): %w", m.Subject, err)
		}
		return Job{}, fmt.Errorf("client: submit on %s: %w", m.Subject, err)
	}
	return Job{ID: id, Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

func (c *Client) jetStreamOnly() (jetstream.JetStream, error) {
	c.jsOnce.Lock()
	defer c.jsOnce.Unlock()
	if c.js == nil {
		js, err := jetstream.New(c.nc)
		if err != nil {
			return nil, fmt.Errorf("client: jetstream: %w", err)
		}
		c.js = js
	}
	return c.js, nil
}

// Result returns the stored result of job id: the Reply, or the job's error as a *schemas.Error,
// or ErrNoResult while it has none.
func (c *Client) Result(ctx context.Context, id string) (*Reply, error) {
	body, err := c.ResultBody(ctx, id)
	if err != nil {
		return nil, err
	}
	return resultReply(id, body)
}

// ResultBody returns the stored result of job id exactly as stored (the body codex.generate would
// have replied: the response, or the error body), or ErrNoResult while it has none.
func (c *Client) ResultBody(ctx context.Context, id string) ([]byte, error) {
	if !schemas.ValidJobID(id) {
		return nil, fmt.Errorf("client: job id %q must match [A-Za-z0-9_=-]{1,128}", id)
	}
	_, kv, err := c.jetStream(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNoResult
	}
	if err != nil {
		return nil, fmt.Errorf("client: read result %s: %w", id, err)
	}
	return e.Value(), nil
}

// Wait waits until job id has a result and returns it as Result does, or ctx's error.
func (c *Client) Wait(ctx context.Context, id string) (*Reply, error) {
	if !schemas.ValidJobID(id) {
		return nil, fmt.Errorf("client: job id %q must match [A-Za-z0-9_=-]{1,128}", id)
	}
	_, kv, err := c.jetStream(ctx)
	if err != nil {
		return nil, err
	}
	w, err := kv.Watch(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("client: watch result %s: %w", id, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("client: watch of result %s ended", id)
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // the end of the initial values, or a delete
			}
			return resultReply(id, e.Value())
		}
	}
}

// resultReply turns a stored result into a Reply or the job's error.
func resultReply(id string, body []byte) (*Reply, error) {
	if e, ok := schemas.ResultError(body); ok {
		return nil, e
	}
	return &Reply{Response: body, OutputText: outputText(body), RequestID: id}, nil
}

// newJobID returns 128 random bits in base64url: a job id that matches [A-Za-z0-9_=-]{1,128} and
// that nobody else can guess.
func newJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
