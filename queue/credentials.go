package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/store"
)

// DefaultCredentialsBucket is the JetStream key-value bucket where workers share their Codex
// logins.
const DefaultCredentialsBucket = store.CredentialsBucket

// ErrNoJetStream is returned by NewCredentialStore when the server (or the account) has no
// JetStream: logins are then shared through their auth files only.
var ErrNoJetStream = store.ErrNoJetStream

// CredentialStoreConfig configures a CredentialStore. Zero values are the documented defaults.
type CredentialStoreConfig struct {
	Bucket   string // default DefaultCredentialsBucket
	Replicas int    // of a bucket created here; default 1 (use 3 on a cluster); an existing bucket keeps its own
}

// CredentialStore is where the workers of a pool share their Codex logins (it implements
// login.Coordinator): a JetStream key-value bucket with one key per login. A key is a hash of
// the login's identity and a value holds the newest tokens and the claim of the worker
// refreshing them, always sealed by the worker under the pool key (the store never sees a token:
// see login.Coordinator). Every write is a
// compare-and-set on the key's revision (Create for a new key, Update otherwise), which is what
// makes one worker at a time refresh a login. Create it with NewCredentialStore. Safe for
// concurrent use.
type CredentialStore struct {
	kv jetstream.KeyValue
}

// NewCredentialStore binds to cfg.Bucket on nc, creating it when missing (file storage, one
// revision kept per key: old tokens are spent and worth nothing). It returns ErrNoJetStream
// (wrapped) when the server has no JetStream.
func NewCredentialStore(ctx context.Context, nc *nats.Conn, cfg CredentialStoreConfig) (*CredentialStore, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultCredentialsBucket
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	js, err := store.JetStream(ctx, nc)
	if err != nil {
		return nil, fmt.Errorf("queue: credential store: %w", err)
	}
	kv, err := store.Bucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "codexpool: Codex logins shared by the workers (keys are hashes; values are sealed)",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("queue: credential store %s: %w", cfg.Bucket, err)
	}
	return &CredentialStore{kv: kv}, nil
}

// Get returns key's value and revision; nil and 0 when the key has none (or was deleted).
func (s *CredentialStore) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("queue: credential store get: %w", err)
	}
	return e.Value(), e.Revision(), nil
}

// Put stores value under key if its revision is still rev (0: only if it has no value). ok is
// false, with a nil error, when another writer came first.
func (s *CredentialStore) Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, bool, error) {
	var n uint64
	var err error
	if rev == 0 {
		n, err = s.kv.Create(ctx, key, value)
	} else {
		n, err = s.kv.Update(ctx, key, value, rev)
	}
	switch {
	case err == nil:
		return n, true, nil
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("queue: credential store put: %w", err)
}

// Watch calls update with key's current value and every new one until ctx is done (it returns
// ctx.Err()) or the watch ends (the connection closed). Deletions are skipped.
func (s *CredentialStore) Watch(ctx context.Context, key string, update func(value []byte, revision uint64)) error {
	w, err := s.kv.Watch(ctx, key, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("queue: credential store watch: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("queue: credential store watch ended")
			}
			if e != nil { // nil marks the end of the initial values
				update(e.Value(), e.Revision())
			}
		}
	}
}
