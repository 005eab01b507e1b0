package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex"
)

// DefaultSessionIdleTimeout is how long a session keeps its socket without a turn, when
// Config.SessionIdleTimeout is zero.
const DefaultSessionIdleTimeout = 5 * time.Minute

// DefaultMaxSessions is how many sessions a worker owns at most, when Config.MaxSessions is
// zero: each may hold an upstream socket.
const DefaultMaxSessions = 1024

// Sessions (the contract's "Sessions"). A request with a session id (schemas.Request.Session)
// belongs to a session. The worker that serves a turn of it without previous_response_id owns it
// from then on: the session keeps that turn's account and reserves one of its upstream sockets
// (codex.Pin), so a later turn with previous_response_id runs on the socket that made the
// response it continues. Turns of a session run one at a time. A continuation this worker cannot
// serve there — it owns no such session, the socket is gone, the account is out — is answered
// previous_response_not_found at once, on which clients resend the whole conversation. A session
// idle for Config.SessionIdleTimeout gives its socket back to the pool, and Close ends them all.
// A worker owns at most Config.MaxSessions: a new session beyond that takes the place of the
// one idle longest (whose next continuation is previous_response_not_found), and when every
// session is in a turn the worker has no room for it: Admit refuses it before it runs, so that
// the queue hands it back to the group (another worker may have room), and the answer when no
// worker has is Admit's 429 worker_busy. Generate called without Admit answers that at once.

// session is one session this worker owns.
type session struct {
	turn  chan struct{} // a one-slot lock, held for a turn: waiting for it honours ctx
	acct  *account      // the account of the last turn; guarded by turn
	pin   *codex.Pin    // the socket reserved on acct; guarded by turn
	last  time.Time     // when the last turn ended; guarded by sessionTable.mu
	users int           // turns holding or waiting for it; guarded by sessionTable.mu
}

// sessionTable is the sessions a worker owns, by id, and the janitor that idles them out.
type sessionTable struct {
	idle time.Duration
	max  int

	mu     sync.Mutex
	m      map[string]*session
	closed bool

	stop chan struct{} // closed by close: stops the janitor
	wg   sync.WaitGroup
}

func newSessionTable(idle time.Duration, maxSessions int) *sessionTable {
	if idle <= 0 {
		idle = DefaultSessionIdleTimeout
	}
	if maxSessions <= 0 {
		maxSessions = DefaultMaxSessions
	}
	t := &sessionTable{idle: idle, max: maxSessions, m: map[string]*session{}, stop: make(chan struct{})}
	t.wg.Add(1)
	go t.janitor()
	return t
}

// errNotFound is the answer to a continuation this worker cannot serve.
func errNotFound(why string) *schemas.Error {
	return schemas.Errorf(schemas.CodePreviousResponseNotFound,
		"previous_response_id: %s; resend the whole conversation without previous_response_id", why)
}

// enter returns the session id's session, holding its turn lock, for a turn. A continuation
// needs a session this worker owns; any other turn makes one if there is none.
func (t *sessionTable) enter(ctx context.Context, id string, continuation bool) (*session, error) {
	t.mu.Lock()
	s := t.m[id]
	switch {
	case t.closed:
		t.mu.Unlock()
		return nil, schemas.Errorf(schemas.CodeUnavailable, "worker: shutting down")
	case s == nil && continuation:
		t.mu.Unlock()
		return nil, errNotFound("this worker holds no such session (its owner is gone, or the turn reached another worker)")
	case s == nil:
		var evicted *session
		var err error
		if s, evicted, err = t.addLocked(id); err != nil {
			t.mu.Unlock()
			return nil, err
		}
		if evicted != nil {
			defer evicted.release()
		}
	}
	s.users++
	t.mu.Unlock()
	select {
	case s.turn <- struct{}{}:
		return s, nil
	case <-ctx.Done():
		t.leave(s, false)
		return nil, ctx.Err()
	}
}

// Admit reserves the room req needs on this worker before it runs (queue.Admitter): a new
// session needs one of Config.MaxSessions, taking the place of the session idle longest if it
// must. The error, when no session can make room, is 429 worker_busy with a retry time. release
// ends the reservation; call it once, after Generate returned (or instead of calling it).
func (w *Worker) Admit(req *schemas.Request) (release func(), err error) {
	if req.Session == "" || req.PreviousResponseID() != "" {
		return func() {}, nil // no session, or a continuation: Generate decides
	}
	s, err := w.sessions.reserve(req.Session)
	if err != nil || s == nil {
		return func() {}, err
	}
	var once sync.Once
	return func() { once.Do(func() { w.sessions.leave(s, false) }) }, nil
}

// reserve returns id's session, made if there is none, counting a user of it so that it stays
// in the table until leave(s, false); nil when the table is closed (Generate answers that).
func (t *sessionTable) reserve(id string) (*session, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, nil
	}
	s := t.m[id]
	var evicted *session
	if s == nil {
		var err error
		if s, evicted, err = t.addLocked(id); err != nil {
			t.mu.Unlock()
			return nil, err
		}
	}
	s.users++
	t.mu.Unlock()
	if evicted != nil {
		evicted.release() // no turn holds it (users was 0): this does not wait
	}
	return s, nil
}

// addLocked adds session id, in the place of the session idle longest when the table is full,
// and returns the session it displaced (nil if none), for the caller to release once it has
// unlocked; the error is full's when every session is in a turn.
func (t *sessionTable) addLocked(id string) (s, evicted *session, err error) {
	if len(t.m) >= t.max {
		if evicted = t.evictLocked(); evicted == nil {
			return nil, nil, t.full()
		}
	}
	s = &session{turn: make(chan struct{}, 1)}
	t.m[id] = s
	return s, evicted, nil
}

// full is the answer to a new session when every session the worker owns is in a turn.
func (t *sessionTable) full() *schemas.Error {
	return errBusy(fmt.Sprintf("worker: %d sessions, the most it owns (max_sessions), all in a turn", t.max))
}

// evictLocked removes the session idle longest (none in a turn or waiting for one) from the
// table and returns it for release, or nil when every session is in use. t.mu is held.
func (t *sessionTable) evictLocked() *session {
	var oldID string
	var old *session
	for id, s := range t.m {
		if s.users == 0 && (old == nil || s.last.Before(old.last)) {
			oldID, old = id, s
		}
	}
	if old != nil {
		delete(t.m, oldID)
	}
	return old
}

// leave ends a turn on s (held is true), or a wait for one that gave up.
func (t *sessionTable) leave(s *session, held bool) {
	if held {
		<-s.turn
	}
	t.mu.Lock()
	s.users--
	s.last = time.Now()
	t.mu.Unlock()
}

// generate runs one turn of s on a (the account the generation routes to): on the session's
// socket when a is the session's account, else on a new reservation on a.
func (s *session) generate(ctx context.Context, a *account, frame []byte, continuation bool, onEvent func(codex.Event) error) (*codex.Result, error) {
	if s.acct != a {
		if continuation {
			return nil, errNotFound("the session's account cannot take it now")
		}
		if s.pin != nil {
			s.pin.Release()
		}
		s.acct, s.pin = a, a.codex.Pin()
	}
	res, err := s.pin.Generate(ctx, frame, continuation, onEvent)
	if errors.Is(err, codex.ErrPinLost) {
		return res, errNotFound("the session's upstream socket is gone")
	}
	if e, ok := schemas.AsError(err); ok && e.UpstreamCode == string(schemas.CodePreviousResponseNotFound) {
		cp := *e
		cp.Status, cp.Code = schemas.CodePreviousResponseNotFound.Status(), schemas.CodePreviousResponseNotFound
		return res, &cp
	}
	return res, err
}

// janitor releases the sockets of sessions idle for t.idle until close.
func (t *sessionTable) janitor() {
	defer t.wg.Done()
	tick := time.NewTicker(max(t.idle/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case now := <-tick.C:
			t.sweep(now)
		}
	}
}

// sweep forgets the sessions idle for t.idle at now and releases their sockets.
func (t *sessionTable) sweep(now time.Time) {
	var stale []*session
	t.mu.Lock()
	for id, s := range t.m {
		if s.users == 0 && now.Sub(s.last) >= t.idle {
			stale = append(stale, s)
			delete(t.m, id)
		}
	}
	t.mu.Unlock()
	for _, s := range stale {
		s.release()
	}
}

// release gives the session's socket back; the session is no longer in the table.
func (s *session) release() {
	s.turn <- struct{}{} // waits for a turn in flight (only close releases a busy session)
	if s.pin != nil {
		s.pin.Release()
	}
	<-s.turn
}

// count returns how many sessions the worker owns now.
func (t *sessionTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// close stops the janitor and releases every session; turns in flight finish first. Later
// turns are refused.
func (t *sessionTable) close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	all := t.m
	t.m = map[string]*session{}
	t.mu.Unlock()
	close(t.stop)
	t.wg.Wait()
	for _, s := range all {
		s.release()
	}
}

// enterSession makes the generation a turn of its request's session, if it has one, holding the
// session's turn lock until leaveSession.
func (g *generation) enterSession(ctx context.Context) error {
	if g.req.Session == "" {
		return nil
	}
	g.cont = g.req.PreviousResponseID() != ""
	s, err := g.w.sessions.enter(ctx, g.req.Session, g.cont)
	if err != nil {
		return err
	}
	g.sess = s
	return nil
}

func (g *generation) leaveSession() {
	if g.sess != nil {
		g.w.sessions.leave(g.sess, true)
	}
}

// excluded is what the router may not pick for the generation: the accounts tried, and for a
// continuation every account but the session's.
func (g *generation) excluded() []*account {
	if !g.cont || g.sess.acct == nil {
		return g.tried
	}
	out := slices.Clone(g.tried)
	for _, a := range g.w.router.accounts {
		if a != g.sess.acct {
			out = append(out, a)
		}
	}
	return out
}

// upstream runs the generation's try on a: on the session's socket in a session, else on a
// pooled or new socket.
func (g *generation) upstream(ctx context.Context, a *account) (*codex.Result, error) {
	if g.sess == nil {
		return a.codex.Generate(ctx, g.frame, g.onEvent)
	}
	return g.sess.generate(ctx, a, g.frame, g.cont, g.onEvent)
}

// Sessions returns how many sessions the worker owns now.
func (w *Worker) Sessions() int { return w.sessions.count() }
