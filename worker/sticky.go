package worker

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// Bindings is where the sticky bindings of sessions to accounts live (Options.Bindings):
// queue.SessionStore keeps them in a JetStream key-value bucket that every worker of the pool
// reads, with a TTL. Keys are digests of session keys (never the key itself); values are account
// names. Implementations are safe for concurrent use.
type Bindings interface {
	// Binding returns the account key is bound to and when the binding was last written; "" when
	// none.
	Binding(ctx context.Context, key string) (account string, written time.Time, err error)
	// Bind binds key to account (and restarts the binding's TTL).
	Bind(ctx context.Context, key, account string) error
}

// sticky is the worker's side of sticky routing: it looks a generation's session up in the
// Bindings and writes the binding back when it is new, moved, or due for a refresh.
//
// The rules (see Worker.Generate):
//   - A session bound to an account that is not cooling down goes to it, waiting up to
//     Config.StickyWait for it to take the generation; after that the generation runs elsewhere
//     without moving the binding.
//   - A generation that fails (a 502, a timeout) leaves the binding as it was.
//   - A generation that completes on another account than its binding's moves the binding only
//     when the bound account is cooling down (it ran out, or its credentials did): once, and the
//     session then sticks to its new account.
type sticky struct {
	store   Bindings
	wait    time.Duration // longest wait for a bound account that is busy
	refresh time.Duration // a binding older than this is written again on use
	timeout time.Duration // bound on one store call
}

// stickyTimeout bounds one call to the Bindings: a slow store costs a request its stickiness,
// never its answer.
const stickyTimeout = time.Second

// binding is a generation's session as the store knows it.
type binding struct {
	key     string    // the digest of the session key; "" = no session
	account string    // "" = unbound
	written time.Time // when the binding was last written
}

// stickyDigest is the store key of a session key: non-secret, and within the characters every
// store allows.
func stickyDigest(session string) string {
	sum := sha256.Sum256([]byte("codexpool sticky\x00" + session))
	return hex.EncodeToString(sum[:16])
}

// lookup returns the binding of session ("" = none). A store error leaves the generation
// unbound for this once.
func (s *sticky) lookup(ctx context.Context, session string) (binding, error) {
	if s == nil || session == "" {
		return binding{}, nil
	}
	b := binding{key: stickyDigest(session)}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var err error
	b.account, b.written, err = s.store.Binding(ctx, b.key)
	return b, err
}

// settle writes the binding after a generation completed on served at now, when it is new,
// moved (moved: the bound account is cooling down), or due for a refresh. It reports whether it
// wrote.
func (s *sticky) settle(ctx context.Context, b binding, served string, moved bool, now time.Time) (bool, error) {
	if s == nil || b.key == "" {
		return false, nil
	}
	switch {
	case b.account == "", b.account != served && moved, b.account == served && now.Sub(b.written) >= s.refresh:
	default:
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	return true, s.store.Bind(ctx, b.key, served)
}

// memBindings is the Bindings of a worker without a shared store: the max most recently used
// keys, in this process only.
type memBindings struct {
	max int

	mu    sync.Mutex
	order *list.List // of *memBinding, most recent first
	keys  map[string]*list.Element
}

type memBinding struct {
	key, account string
	written      time.Time
}

func newMemBindings(max int) *memBindings {
	return &memBindings{max: max, order: list.New(), keys: map[string]*list.Element{}}
}

func (m *memBindings) Binding(_ context.Context, key string) (string, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.keys[key]; ok {
		m.order.MoveToFront(e)
		b := e.Value.(*memBinding)
		return b.account, b.written, nil
	}
	return "", time.Time{}, nil
}

func (m *memBindings) Bind(_ context.Context, key, account string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if e, ok := m.keys[key]; ok {
		b := e.Value.(*memBinding)
		b.account, b.written = account, now
		m.order.MoveToFront(e)
		return nil
	}
	m.keys[key] = m.order.PushFront(&memBinding{key: key, account: account, written: now})
	for m.order.Len() > m.max {
		old := m.order.Back()
		m.order.Remove(old)
		delete(m.keys, old.Value.(*memBinding).key)
	}
	return nil
}

// newSticky returns the sticky routing of a worker with cfg (defaults applied) and store (nil =
// in-process bindings); nil with Config.NoSticky.
func newSticky(cfg Config, store Bindings) *sticky {
	if cfg.NoSticky {
		return nil
	}
	if store == nil {
		store = newMemBindings(cfg.AffinityKeys)
	}
	return &sticky{store: store, wait: cfg.StickyWait, refresh: cfg.StickyRefresh, timeout: stickyTimeout}
}
