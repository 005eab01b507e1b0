// Package client is the Go client of a codexpool pool: it sends generation requests over NATS
// and reads the one-shot or streamed replies. It links nats.go and nothing of the worker side
// (no NATS server, no JSON Schema compiler).
//
// Call [New] with a connected *nats.Conn, then [Client.Generate] for a one-shot reply or
// [Client.Stream] for the events as they arrive. Errors the pool answers with are
// *schemas.Error values (status, code, retry time); a pool with no worker subscribed gives an
// error wrapping nats.ErrNoResponders. A conversation whose turns continue each other
// (previous_response_id) goes through a [Session] (Client.Session), which keeps it on one worker.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/jsonobj"
)

// Defaults of Options.
const (
	DefaultClientTimeout = 10 * time.Minute
	DefaultRetryBusy     = 3
	busyBackoffBase      = 50 * time.Millisecond
	busyBackoffMax       = 2 * time.Second
)

// Options configures a Client. The zero value of every field is its documented default.
type Options struct {
	Subject string        // request subject; default "codex.generate"
	Timeout time.Duration // per request when ctx has no deadline; default 10m
	// RetryBusy is how often a request answered 429 worker_busy is sent again, after a jittered
	// backoff (or the error's retry-after); default 3, negative for none.
	RetryBusy int
	// CancelSubject is where the client publishes a request's Codex-Request-Id when it gives up
	// (its context ends, or a Stream callback fails), so the worker stops the generation; default
	// "codex.cancel".
	CancelSubject string
	// JobsSubject is the jobs subject prefix: Submit publishes to JobsSubject+".submit"; default
	// "codex.jobs".
	JobsSubject string
	// ResultsBucket is the KV bucket of job results; default "CODEXPOOL_RESULTS".
	ResultsBucket string
}

// Client sends generation requests to the pool. It is safe for concurrent use.
type Client struct {
	nc   *nats.Conn
	opts Options
	jsState
}

// Reply is a successful generation.
type Reply struct {
	Response   json.RawMessage // the response object (one-shot: the reply payload; stream: from response.completed)
	OutputText string          // the response's output_text
	RequestID  string          // Codex-Request-Id the worker answered with
	Worker     string          // Codex-Worker: the worker that answered
	Account    string          // Codex-Account: the worker's account that served it, when it says
}

// New returns a Client that sends requests over nc.
func New(nc *nats.Conn, opts Options) *Client {
	if opts.Subject == "" {
		opts.Subject = schemas.DefaultSubject
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultClientTimeout
	}
	if opts.RetryBusy == 0 {
		opts.RetryBusy = DefaultRetryBusy
	}
	if opts.RetryBusy < 0 {
		opts.RetryBusy = 0
	}
	if opts.CancelSubject == "" {
		opts.CancelSubject = schemas.DefaultCancelSubject
	}
	if opts.JobsSubject == "" {
		opts.JobsSubject = schemas.DefaultJobsSubject
	}
	if opts.ResultsBucket == "" {
		opts.ResultsBucket = schemas.DefaultResultsBucket
	}
	return &Client{nc: nc, opts: opts}
}

// Generate sends the request payload req (a Responses API create body) with the optional headers
// hdr and waits for the one-shot reply. An error reply is returned as *schemas.Error; when no worker
// is subscribed the error wraps nats.ErrNoResponders. A worker_busy reply is retried as configured.
// Without a deadline on ctx, the client's Timeout applies; the remaining time is sent as
// Codex-Timeout unless hdr sets one.
func (c *Client) Generate(ctx context.Context, req []byte, hdr nats.Header) (r *Reply, err error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	hdr = withRequestID(hdr)
	ctx, span := startRequest(ctx, "request", c.opts.Subject, hdr.Get(schemas.HeaderRequestID), trace.SpanKindClient)
	defer func() { endRequest(span, r, err) }()
	for attempt := 0; ; attempt++ {
		m := c.request(ctx, req, hdr)
		resp, err := c.nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				c.cancel(hdr.Get(schemas.HeaderRequestID))
				return nil, err
			}
			return nil, fmt.Errorf("queue: request on %s: %w", c.opts.Subject, err)
		}
		if e := replyError(resp); e != nil {
			if e.Code == schemas.CodeWorkerBusy && attempt < c.opts.RetryBusy {
				if err := sleepCtx(ctx, busyWait(attempt, e.RetryAfter)); err != nil {
					return nil, err
				}
				continue
			}
			return nil, e
		}
		r = &Reply{Response: resp.Data, RequestID: resp.Header.Get(schemas.HeaderRequestID), Worker: resp.Header.Get(schemas.HeaderWorker),
			Account: resp.Header.Get(schemas.HeaderAccount)}
		r.OutputText = outputText(resp.Data)
		return r, nil
	}
}

// Stream sends req with "stream": true set and calls fn with each event in Codex-Seq order until
// the end-of-stream sentinel: Open and Next in a loop. An error message ends the stream with a
// *schemas.Error; an error from fn stops reading (the pool is told to stop the request) and is
// returned. The Reply is built from the response.completed event. A worker_busy answer before
// any event is retried as configured; no responders wraps nats.ErrNoResponders.
func (c *Client) Stream(ctx context.Context, req []byte, hdr nats.Header, fn func(event []byte) error) (*Reply, error) {
	evs, err := c.Open(ctx, req, hdr)
	if err != nil {
		return nil, err
	}
	defer evs.Close()
	for {
		ev, err := evs.Next(ctx)
		if errors.Is(err, io.EOF) {
			return evs.Reply(), nil
		}
		if err != nil {
			return nil, err
		}
		if err := fn(ev); err != nil {
			return nil, err // Close stops the request at the pool
		}
	}
}

// cancel tells the pool to stop request id (best effort: a worker that finished already, or
// never got it, ignores it). It flushes briefly so the message leaves even if the caller closes
// the connection next.
func (c *Client) cancel(id string) {
	if id == "" {
		return
	}
	if err := c.nc.Publish(c.opts.CancelSubject, []byte(id)); err == nil {
		_ = c.nc.FlushTimeout(500 * time.Millisecond)
	}
}

// withTimeout applies the client's Timeout when ctx has no deadline.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.opts.Timeout)
}

// request builds the request message: hdr copied and Codex-Timeout set to the time left unless hdr sets one.
func (c *Client) request(ctx context.Context, data []byte, hdr nats.Header) *nats.Msg {
	h := cloneHeader(hdr)
	if dl, ok := ctx.Deadline(); ok && h.Get(schemas.HeaderTimeout) == "" {
		if left := time.Until(dl); left > 0 {
			h.Set(schemas.HeaderTimeout, left.Round(time.Millisecond).String())
		}
	}
	tracing.InjectNATS(ctx, h)
	return &nats.Msg{Subject: c.opts.Subject, Data: data, Header: h}
}

// withRequestID returns hdr with a Codex-Request-Id, generated when absent, so retries share it.
func withRequestID(hdr nats.Header) nats.Header {
	if hdr.Get(schemas.HeaderRequestID) != "" {
		return hdr
	}
	h := cloneHeader(hdr)
	h.Set(schemas.HeaderRequestID, uuid.NewString())
	return h
}

// replyError returns the error a reply carries, or nil.
func replyError(m *nats.Msg) *schemas.Error {
	code := m.Header.Get(schemas.HeaderServiceErrorCode)
	if code == "" {
		return nil
	}
	if e, err := schemas.ParseErrorBody(m.Data); err == nil {
		return e
	}
	status, _ := strconv.Atoi(code)
	return &schemas.Error{Status: status, Code: schemas.CodeUpstreamError, Message: m.Header.Get(schemas.HeaderServiceError)}
}

// outputText returns the "output_text" field of a response object, "" if it has none.
func outputText(response []byte) string {
	var v struct {
		OutputText string `json:"output_text"`
	}
	_ = json.Unmarshal(response, &v)
	return v.OutputText
}

// forceStream returns req with "stream": true: as it is when it says so already (one scan of
// its members, no decoding), else with the member set. A payload that is not a JSON object is
// sent as is: the worker refuses it with a proper 400.
func forceStream(req []byte) ([]byte, error) {
	ms, isObj := jsonobj.Members(req)
	if !isObj || !json.Valid(req) {
		return req, nil
	}
	if v, found := jsonobj.Field(req, ms, "stream"); found && bytes.Equal(v, []byte("true")) {
		return req, nil
	}
	return jsonobj.WithMember(req, ms, "stream", []byte("true")), nil
}

// busyWait is the pause before retry attempt+1 after worker_busy: the worker's retry-after when
// given, else doubling from 50ms (capped at 2s), with up to 50% jitter so clients spread out.
func busyWait(attempt int, retryAfter time.Duration) time.Duration {
	d := retryAfter
	if d <= 0 {
		d = busyBackoffBase << min(attempt, 10)
		d = min(d, busyBackoffMax)
	}
	return d + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// msgQueue is an unbounded FIFO of messages filled by a subscription callback that never blocks.
type msgQueue struct {
	mu    sync.Mutex
	msgs  []*nats.Msg
	ready chan struct{} // holds a token while msgs is non-empty
}

func newMsgQueue() *msgQueue { return &msgQueue{ready: make(chan struct{}, 1)} }

func (q *msgQueue) push(m *nats.Msg) {
	q.mu.Lock()
	q.msgs = append(q.msgs, m)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop returns the oldest message, waiting for one until ctx or req is done (its error),
// or idle fires (ErrIdle).
func (q *msgQueue) pop(ctx, req context.Context, idle <-chan time.Time) (*nats.Msg, error) {
	for {
		q.mu.Lock()
		if len(q.msgs) > 0 {
			m := q.msgs[0]
			q.msgs[0] = nil
			q.msgs = q.msgs[1:]
			q.mu.Unlock()
			return m, nil
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-req.Done():
			return nil, req.Err()
		case <-idle:
			return nil, ErrIdle
		}
	}
}

// cloneHeader returns a copy of h that Set can change without touching h.
func cloneHeader(h nats.Header) nats.Header {
	if c := maps.Clone(h); c != nil {
		return c
	}
	return nats.Header{}
}
