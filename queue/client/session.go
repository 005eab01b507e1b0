package client

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
)

// A Session sends the turns of one conversation (the contract's "Sessions"): every request
// carries its Codex-Session-Id; the first goes to the queue subject, and once a worker answered
// (Codex-Worker), the later ones go to that worker's own subject, so a turn may continue the
// previous response with previous_response_id and only the new items in input. When that worker
// is gone (NATS "no responders") or no longer has the session's socket, the turn fails with
// a *schemas.Error of code previous_response_not_found, at once: resend the whole conversation
// without previous_response_id, which any worker serves and which makes it the session's new
// owner. Make one with Client.Session. Turns of one Session must not overlap; its methods are
// safe for concurrent use otherwise.
type Session struct {
	c  *Client
	id string

	mu     sync.Mutex
	worker string // the owner learned from the last reply; "" = none yet
}

// Session returns a Session with id ("" = a new random id).
func (c *Client) Session(id string) *Session {
	if id == "" {
		id = uuid.NewString()
	}
	return &Session{c: c, id: id}
}

// ID returns the session id sent as Codex-Session-Id.
func (s *Session) ID() string { return s.id }

// Worker returns the id of the worker that owns the session, as the last reply named it; "" before
// the first reply.
func (s *Session) Worker() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.worker
}

// Generate is Client.Generate for a turn of the session.
func (s *Session) Generate(ctx context.Context, req []byte, hdr nats.Header) (*Reply, error) {
	via, worker := s.route()
	r, err := via.Generate(ctx, req, s.header(hdr))
	return s.learn(r, worker, err)
}

// Stream is Client.Stream for a turn of the session.
func (s *Session) Stream(ctx context.Context, req []byte, hdr nats.Header, fn func(event []byte) error) (*Reply, error) {
	via, worker := s.route()
	r, err := via.Stream(ctx, req, s.header(hdr), fn)
	return s.learn(r, worker, err)
}

// route returns the client that reaches the session's owner (the queue subject before there is
// one) and the owner it reaches.
func (s *Session) route() (*Client, string) {
	worker := s.Worker()
	if worker == "" {
		return s.c, ""
	}
	return s.c.OnWorker(worker), worker
}

func (s *Session) header(hdr nats.Header) nats.Header {
	h := cloneHeader(hdr)
	h.Set(schemas.HeaderSessionID, s.id)
	return h
}

// learn keeps the owner a reply names, and turns "no responders" on an owner's subject into
// previous_response_not_found, forgetting that owner.
func (s *Session) learn(r *Reply, via string, err error) (*Reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil && r.Worker != "":
		s.worker = r.Worker
	case via != "" && errors.Is(err, nats.ErrNoResponders):
		s.worker = ""
		return nil, schemas.Errorf(schemas.CodePreviousResponseNotFound,
			"the session's worker %s is gone (no responders on its subject); resend the whole conversation without previous_response_id", via)
	}
	if e, ok := schemas.AsError(err); ok && e.Code == schemas.CodePreviousResponseNotFound {
		s.worker = "" // the next turn, a full resend, may go to any worker
	}
	return r, err
}

// OnWorker returns a Client like c whose requests go to the own subject of the worker id
// (schemas.WorkerSubject) instead of the queue group: that worker serves them, or, when it is
// full, hands them back to the group; when it is gone they fail with nats.ErrNoResponders at once.
func (c *Client) OnWorker(id string) *Client {
	opts := c.opts
	opts.Subject = schemas.WorkerSubject(c.opts.Subject, id)
	return New(c.nc, opts)
}
