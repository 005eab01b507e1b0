package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/store"
)

// KeysBucket is the JetStream key-value bucket of the keys managed live: one entry per key,
// named by the key's name, holding a KeyEntry (never a secret).
const KeysBucket = store.KeysBucket

// OpenKeysBucket opens the keys bucket, creating it when absent (file storage: the keys survive
// a restart of the server; one revision per key: the audit stream keeps the history).
func OpenKeysBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := store.Bucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      KeysBucket,
		Description: "codexpool: the gateways' client keys (SHA-256 digests of the secrets, limits, models, admin)",
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: keys bucket %s: %w", KeysBucket, err)
	}
	return kv, nil
}

// LiveKeys are the keys of the keys bucket, kept current by a watcher: a change written by
// `codexpool keys` (KeyAdmin) is seen within milliseconds. Give it to Config.LiveKeys. Make one
// with WatchKeys and Stop it when done; it is safe for concurrent use.
type LiveKeys struct {
	cur    atomic.Pointer[liveSet]
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

// liveSet is one state of the bucket; it never changes once published.
type liveSet struct {
	keys []Key
	// names holds every name with an entry in the bucket, revoked ones (a delete marker) too:
	// a key of the keys file with such a name is replaced or revoked by it.
	names map[string]bool
	// keyed: the bucket has held an entry since this process started, so the gateway asks for
	// keys even when the last one is revoked (it never opens up again).
	keyed bool
}

// watchRetry is the pause before a watcher that ended on its own is started again.
const watchRetry = time.Second

// WatchKeys reads the bucket's keys (ctx bounds that first read) and keeps watching it until
// Stop. An entry that does not decode is logged and counts as revoked: its name accepts nothing.
// nc is kv's connection: when it reconnects the watch starts again at once (the bucket is read
// anew), rather than when the watcher's heartbeats time out; nil: no such restart.
func WatchKeys(ctx context.Context, nc *nats.Conn, kv jetstream.KeyValue, log *slog.Logger) (*LiveKeys, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &LiveKeys{log: log.With("component", "keys", "bucket", kv.Bucket()), done: make(chan struct{})}
	l.cur.Store(&liveSet{})
	wctx, cancel := context.WithCancel(context.Background())
	w, entries, err := l.load(ctx, wctx, kv)
	if err != nil {
		cancel()
		return nil, err
	}
	l.cancel = cancel
	var reconnected chan nats.Status // nil without nc: never ready
	if nc != nil {
		reconnected = nc.StatusChanged(nats.CONNECTED)
	}
	go func() {
		l.run(wctx, kv, w, entries, reconnected)
		if nc != nil {
			nc.RemoveStatusListener(reconnected)
		}
		close(l.done)
	}()
	return l, nil
}

// Stop ends the watch and waits for it.
func (l *LiveKeys) Stop() {
	l.cancel()
	<-l.done
}

// Len is the number of keys the bucket holds now (revoked ones not counted).
func (l *LiveKeys) Len() int { return len(l.cur.Load().keys) }

// Limited reports whether a key of the bucket has a limit (which needs a Meter to hold).
func (l *LiveKeys) Limited() bool {
	for _, k := range l.cur.Load().keys {
		if k.Limits != (Limits{}) {
			return true
		}
	}
	return false
}

// load starts a watcher under wctx and applies the bucket's entries up to its end-of-initial
// marker, waiting at most until ctx is done.
func (l *LiveKeys) load(ctx, wctx context.Context, kv jetstream.KeyValue) (jetstream.KeyWatcher, map[string]*Key, error) {
	w, err := kv.WatchAll(wctx)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: watch keys bucket %s: %w", kv.Bucket(), err)
	}
	entries := map[string]*Key{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, nil, fmt.Errorf("gateway: watch keys bucket %s: the watcher ended", kv.Bucket())
			}
			if e == nil { // the initial values are all in
				l.publish(entries)
				return w, entries, nil
			}
			l.apply(entries, e)
		case <-ctx.Done():
			_ = w.Stop()
			return nil, nil, fmt.Errorf("gateway: read keys bucket %s: %w", kv.Bucket(), ctx.Err())
		}
	}
}

// run applies each change until wctx is done; a watcher that ends on its own is started again
// after watchRetry, and at once when the connection is back (the whole bucket is then read anew).
func (l *LiveKeys) run(wctx context.Context, kv jetstream.KeyValue, w jetstream.KeyWatcher, entries map[string]*Key, reconnected <-chan nats.Status) {
	for {
		now := false
		if w != nil {
			now = l.follow(wctx, w, entries, reconnected)
			_ = w.Stop()
		}
		if wctx.Err() != nil {
			return
		}
		if !now {
			select {
			case <-wctx.Done():
				return
			case <-reconnected:
			case <-time.After(watchRetry):
			}
		}
		var err error
		rctx, cancel := context.WithTimeout(wctx, 30*time.Second)
		w, entries, err = l.load(rctx, wctx, kv)
		cancel()
		if err != nil {
			l.log.Warn("keys: watching the bucket again failed; the keys in use stay as they were", "error", err)
		}
	}
}

// follow applies the watcher's changes until it ends, wctx is done, or the connection is back
// (then it reports true: watch again now).
func (l *LiveKeys) follow(wctx context.Context, w jetstream.KeyWatcher, entries map[string]*Key, reconnected <-chan nats.Status) bool {
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return false
			}
			if e == nil {
				continue
			}
			l.apply(entries, e)
			l.publish(entries)
		case <-reconnected:
			l.log.Info("keys: NATS reconnected; reading the bucket again")
			return true
		case <-wctx.Done():
			return false
		}
	}
}

// apply records one entry in entries: its key, or nil for a revoked (deleted, purged or
// undecodable) one.
func (l *LiveKeys) apply(entries map[string]*Key, e jetstream.KeyValueEntry) {
	name := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		entries[name] = nil
		l.log.Info("keys: revoked", "key", name, "revision", e.Revision())
		return
	}
	k, err := decodeEntry(e.Value())
	if err == nil && k.Name != name {
		err = fmt.Errorf("gateway: key entry %s names another key, %q", name, k.Name)
	}
	if err != nil {
		entries[name] = nil
		l.log.Warn("keys: an entry of the bucket does not decode; its name accepts no key", "key", name, "error", err)
		return
	}
	entries[name] = &k
	l.log.Info("keys: key in use", "key", name, "revision", e.Revision())
}

// publish makes entries the keys in use.
func (l *LiveKeys) publish(entries map[string]*Key) {
	s := &liveSet{names: make(map[string]bool, len(entries)), keyed: l.cur.Load().keyed || len(entries) > 0}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		k := entries[name]
		s.names[name] = k != nil
		if k != nil {
			s.keys = append(s.keys, *k)
		}
	}
	l.cur.Store(s)
}
