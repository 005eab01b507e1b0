package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/store"
)

// DefaultSessionsBucket is the JetStream key-value bucket of the pool's sticky session bindings.
const DefaultSessionsBucket = store.SessionsBucket

// DefaultSessionTTL is how long a session binding nobody uses lasts.
const DefaultSessionTTL = time.Hour

// SessionStoreConfig configures a SessionStore. Zero values are the documented defaults.
type SessionStoreConfig struct {
	Bucket   string        // default DefaultSessionsBucket
	TTL      time.Duration // of a bucket created here; default DefaultSessionTTL; an existing bucket keeps its own
	Replicas int           // of a bucket created here; default 1
}

// SessionStore is where the workers of a pool keep which account each session is bound to (it
// implements worker.Bindings): a JetStream key-value bucket whose entries expire TTL after their
// last write, so every worker sees the same binding and a restart of any process (worker or
// gateway) loses none. Keys are digests made by the worker; values are account names. Create it
// with NewSessionStore. Safe for concurrent use.
type SessionStore struct {
	kv  jetstream.KeyValue
	ttl time.Duration
}

// NewSessionStore binds to cfg.Bucket on nc, creating it when missing (file storage, one
// revision per key, entries expiring cfg.TTL after their last write). It returns ErrNoJetStream
// (wrapped) when the server has no JetStream.
func NewSessionStore(ctx context.Context, nc *nats.Conn, cfg SessionStoreConfig) (*SessionStore, error) {
	cfg.Bucket = cmp.Or(cfg.Bucket, DefaultSessionsBucket)
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultSessionTTL
	}
	cfg.Replicas = max(cfg.Replicas, 1)
	js, err := store.JetStream(ctx, nc)
	if err != nil {
		return nil, fmt.Errorf("queue: session store: %w", err)
	}
	kv, err := store.Bucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "codexpool: sticky bindings of sessions to accounts (keys are digests)",
		History:     1,
		TTL:         cfg.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("queue: session store %s: %w", cfg.Bucket, err)
	}
	ttl := cfg.TTL
	if st, serr := kv.Status(ctx); serr == nil && st.TTL() > 0 {
		ttl = st.TTL()
	}
	return &SessionStore{kv: kv, ttl: ttl}, nil
}

// TTL is how long a binding lasts after its last write (the bucket's own, when it existed).
func (s *SessionStore) TTL() time.Duration { return s.ttl }

// Binding returns the account key is bound to and when that was written; "" when none.
func (s *SessionStore) Binding(ctx context.Context, key string) (string, time.Time, error) {
	e, err := s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return "", time.Time{}, nil
	case err != nil:
		return "", time.Time{}, fmt.Errorf("queue: session store get: %w", err)
	}
	return string(e.Value()), e.Created(), nil
}

// Bind binds key to account, restarting the binding's TTL.
func (s *SessionStore) Bind(ctx context.Context, key, account string) error {
	if _, err := s.kv.Put(ctx, key, []byte(account)); err != nil {
		return fmt.Errorf("queue: session store put: %w", err)
	}
	return nil
}
