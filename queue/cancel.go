package queue

import (
	"context"
	"sync"
	"time"

	"github.com/codexpool/codexpool/schemas"

	"github.com/nats-io/nats.go"
)

// Cancellation: every worker subscribes to the cancel subject (no queue group: the request runs
// on one worker, which one the client does not know). A message's payload is a Codex-Request-Id;
// the worker running that request cancels its context with errCancelled, which the Generator sees
// at once (the Codex client stops reading and closes the socket rather than pooling it), frees
// the slot and answers 499 cancelled where a client may still listen. Unknown ids are ignored.

// errCancelled is the cancellation cause of a generation stopped on the cancel subject.
var errCancelled = schemas.ErrCancelled

// maxCancelID bounds the request ids a cancel message may name.
const maxCancelID = 256

// running maps request ids to the cancel functions of their generations (an id may run more
// than once: client ids are not unique by force). It also remembers, briefly, ids cancelled while
// nothing here ran them: a request being handed back between workers at that moment, or one that
// arrives after its client gave up, is then stopped as soon as it starts.
type running struct {
	mu     sync.Mutex
	m      map[string]map[*cancelEntry]struct{}
	recent map[string]time.Time // ids cancelled while not running here, with when
	order  []string             // recent's keys, oldest first (a ring of at most maxRecentCancels)
}

// A cancel for an id that is not running is kept this long, for at most this many ids.
const (
	recentCancelTTL  = 30 * time.Second
	maxRecentCancels = 1024
)

type cancelEntry struct{ cancel context.CancelCauseFunc }

// add registers a generation of id; the returned func removes it.
func (r *running) add(id string, cancel context.CancelCauseFunc) (remove func()) {
	e := &cancelEntry{cancel: cancel}
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]map[*cancelEntry]struct{}{}
	}
	set := r.m[id]
	if set == nil {
		set = map[*cancelEntry]struct{}{}
		r.m[id] = set
	}
	set[e] = struct{}{}
	at, early := r.recent[id]
	if early {
		delete(r.recent, id)
	}
	r.mu.Unlock()
	if early && time.Since(at) < recentCancelTTL {
		cancel(errCancelled) // its client gave up before it started here
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.m[id], e)
		if len(r.m[id]) == 0 {
			delete(r.m, id)
		}
	}
}

// cancel stops every generation of id and reports how many there were.
func (r *running) cancel(id string) int {
	r.mu.Lock()
	set := r.m[id]
	entries := make([]*cancelEntry, 0, len(set))
	for e := range set {
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		r.remember(id)
	}
	r.mu.Unlock()
	for _, e := range entries {
		e.cancel(errCancelled)
	}
	return len(entries)
}

// remember records a cancel for an id not running here; r.mu is held.
func (r *running) remember(id string) {
	if r.recent == nil {
		r.recent = map[string]time.Time{}
	}
	if _, ok := r.recent[id]; !ok {
		if len(r.order) >= maxRecentCancels {
			delete(r.recent, r.order[0])
			r.order = r.order[1:]
		}
		r.order = append(r.order, id)
	}
	r.recent[id] = time.Now()
}

// cancellable returns a context for a generation of id that the cancel subject can stop, and the
// func to call when it is done.
func (s *Service) cancellable(parent context.Context, id string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	remove := s.running.add(id, cancel)
	return ctx, func() {
		remove()
		cancel(nil)
	}
}

// onCancel handles one message on the cancel subject.
func (s *Service) onCancel(m *nats.Msg) {
	id := string(m.Data)
	if id == "" || len(id) > maxCancelID {
		return
	}
	if n := s.running.cancel(id); n > 0 {
		s.st.cancelled.Add(uint64(n))
		s.log.Info("generation cancelled on request", "request_id", id)
	}
}
