package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/store"
)

// DefaultLeasesBucket is the JetStream key-value bucket of the accounts' concurrency slots.
const DefaultLeasesBucket = store.LeasesBucket

// DefaultLeaseTTL is how long a slot outlives the last renewal of its holder: the slots of a
// worker that died come back this long after it stopped renewing them.
const DefaultLeaseTTL = 6 * time.Second

// LeaseStoreConfig configures a LeaseStore. Zero values are the documented defaults.
type LeaseStoreConfig struct {
	Bucket   string        // default DefaultLeasesBucket
	TTL      time.Duration // of a bucket created here; default DefaultLeaseTTL; an existing bucket keeps its own
	Replicas int           // of a bucket created here; default 1
	Owner    string        // written into the slots it holds, for operators (a worker id); default "worker"
	Logger   *slog.Logger  // renewals that fail; nil = discard
}

// LeaseStore holds accounts' concurrency slots as leases (it implements worker.Slots): the
// slots of an account are the keys <account>.0 … <account>.<max-1> of a JetStream key-value
// bucket whose entries expire TTL after their last write. Acquire creates the first free key
// (a compare-and-set: one holder per slot); the store renews every slot it holds each TTL/3
// and deletes it on release. Create it with NewLeaseStore and Close it when done. Safe for
// concurrent use.
type LeaseStore struct {
	kv    jetstream.KeyValue
	ttl   time.Duration
	owner []byte
	log   *slog.Logger

	// io serializes the writes to held slots (renewals, releases), so that a release deletes
	// the revision the last renewal wrote. It is taken before mu.
	io   sync.Mutex
	mu   sync.Mutex
	held map[string]uint64 // key -> revision of our last write

	stop chan struct{}
	done chan struct{}
}

// NewLeaseStore binds to cfg.Bucket on nc, creating it when missing (memory storage: slots are
// worth nothing after a server restart), and starts renewing. It returns ErrNoJetStream
// (wrapped) when the server has no JetStream.
func NewLeaseStore(ctx context.Context, nc *nats.Conn, cfg LeaseStoreConfig) (*LeaseStore, error) {
	cfg.Bucket = cmp.Or(cfg.Bucket, DefaultLeasesBucket)
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	js, err := store.JetStream(ctx, nc)
	if err != nil {
		return nil, fmt.Errorf("queue: lease store: %w", err)
	}
	kv, err := store.Bucket(ctx, js, jetstream.KeyValueConfig{
		Bucket: cfg.Bucket, Description: "codexpool: accounts' concurrency slots, leased by workers",
		History: 1, TTL: cfg.TTL, Storage: jetstream.MemoryStorage, Replicas: max(cfg.Replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("queue: lease store %s: %w", cfg.Bucket, err)
	}
	ttl := cfg.TTL
	if st, serr := kv.Status(ctx); serr == nil && st.TTL() > 0 {
		ttl = st.TTL()
	}
	s := &LeaseStore{kv: kv, ttl: ttl, owner: []byte(cmp.Or(cfg.Owner, "worker")), log: cfg.Logger,
		held: map[string]uint64{}, stop: make(chan struct{}), done: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	go s.renewLoop()
	return s, nil
}

// TTL is how long a slot outlives its holder's last renewal (the bucket's own, when it existed).
func (s *LeaseStore) TTL() time.Duration { return s.ttl }

// Acquire takes the first free one of max slots of account. ok is false, with a nil error,
// when all are held. release deletes the slot (it may be called more than once).
func (s *LeaseStore) Acquire(ctx context.Context, account string, max int) (release func(), ok bool, err error) {
	for i := range max {
		key := account + "." + strconv.Itoa(i)
		rev, err := s.kv.Create(ctx, key, s.owner)
		switch {
		case errors.Is(err, jetstream.ErrKeyExists):
			continue
		case err != nil:
			return nil, false, fmt.Errorf("queue: lease store: %w", err)
		}
		s.mu.Lock()
		s.held[key] = rev
		s.mu.Unlock()
		return func() { s.release(key) }, true, nil
	}
	return nil, false, nil
}

// release deletes key if this store still holds it.
func (s *LeaseStore) release(key string) {
	s.io.Lock()
	defer s.io.Unlock()
	s.mu.Lock()
	rev, ok := s.held[key]
	delete(s.held, key)
	s.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl)
	defer cancel()
	// A slot renewed or taken by someone else since is theirs: the revision check leaves it.
	if err := s.kv.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		s.log.Warn("account slots: cannot release a slot; it expires on its own", "slot", key, "error", err)
	}
}

// renewLoop renews every held slot each TTL/3 until Close.
func (s *LeaseStore) renewLoop() {
	defer close(s.done)
	t := time.NewTicker(max(s.ttl/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.renew()
		}
	}
}

// renew writes every held slot again (a compare-and-set on its revision). A slot lost meanwhile
// (it expired and someone else took it) is forgotten: its generation runs on, uncounted.
func (s *LeaseStore) renew() {
	s.mu.Lock()
	keys := make(map[string]bool, len(s.held))
	for k := range s.held {
		keys[k] = true
	}
	s.mu.Unlock()
	for key := range keys {
		s.renewKey(key)
	}
}

// renewKey renews key if it is still held.
func (s *LeaseStore) renewKey(key string) {
	s.io.Lock()
	defer s.io.Unlock()
	s.mu.Lock()
	rev, ok := s.held[key]
	s.mu.Unlock()
	if !ok {
		return // released meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl/3)
	n, err := s.kv.Update(ctx, key, s.owner, rev)
	cancel()
	s.mu.Lock()
	if err != nil {
		delete(s.held, key)
	} else {
		s.held[key] = n
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("account slots: lost a slot (not renewed in time)", "slot", key, "error", err)
	}
}

// Close stops renewing; held slots expire TTL later (release them first to free them at once).
func (s *LeaseStore) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}
