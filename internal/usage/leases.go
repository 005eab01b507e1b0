package usage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lease is one owner's share of a key's concurrent requests, valid until Expires (unix ms).
type lease struct {
	N       int   `json:"n"`
	Expires int64 `json:"exp"`
}

// leases are this Store's concurrency leases: one KV entry per key maps each owner (gateway) to
// its count and expiry. An owner renews its own every third of the TTL; a gateway that died
// stops renewing, and its share is ignored once expired.
type leases struct {
	kv    jetstream.KeyValue
	owner string
	ttl   time.Duration

	mu   sync.Mutex
	held map[string]int // key -> requests this owner holds

	done chan struct{}
	wg   sync.WaitGroup
}

func newLeases(kv jetstream.KeyValue, cfg Config) *leases {
	owner := cfg.Owner
	if owner == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		owner = hex.EncodeToString(b)
	}
	l := &leases{kv: kv, owner: owner, ttl: cfg.LeaseTTL, held: map[string]int{}, done: make(chan struct{})}
	l.wg.Add(1)
	go l.renewLoop()
	return l
}

// acquire takes one of max slots of key; the release func gives it back.
func (l *leases) acquire(ctx context.Context, key string, limit int) (func(), error) {
	err := l.change(ctx, key, func(m map[string]lease, now int64) error {
		total := 0
		for _, ls := range m {
			total += ls.N
		}
		if total >= limit {
			return &LimitError{Limit: "max_concurrent", Max: int64(limit), RetryAfter: time.Second}
		}
		own := m[l.owner]
		own.N++
		m[l.owner] = own
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.held[key]++
	l.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { l.release(key) }) }, nil
}

// release gives one slot of key back. It outlives the request's context on purpose.
func (l *leases) release(key string) {
	l.mu.Lock()
	l.held[key]--
	if l.held[key] <= 0 {
		delete(l.held, key)
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A release that fails expires with the lease instead.
	_ = l.change(ctx, key, func(m map[string]lease, _ int64) error {
		own := m[l.owner]
		own.N--
		m[l.owner] = own
		return nil
	})
}

// change applies fn to key's entry (live leases only; this owner's renewed) by compare-and-set.
func (l *leases) change(ctx context.Context, key string, fn func(m map[string]lease, now int64) error) error {
	k := kvKey("conc", key)
	for range casAttempts {
		m := map[string]lease{}
		rev, err := getEntry(ctx, l.kv, k, &m)
		if err != nil {
			return err
		}
		now := time.Now().UnixMilli()
		for o, ls := range m {
			if ls.Expires <= now || ls.N <= 0 {
				delete(m, o)
			}
		}
		if err := fn(m, now); err != nil {
			return err
		}
		if own, ok := m[l.owner]; ok {
			if own.N <= 0 {
				delete(m, l.owner)
			} else {
				m[l.owner] = lease{N: own.N, Expires: now + l.ttl.Milliseconds()}
			}
		}
		if err := putEntry(ctx, l.kv, k, rev, m); !errors.Is(err, errConflict) {
			return err
		}
	}
	return fmt.Errorf("usage: the concurrency state of %q stayed contended", key)
}

// renewLoop renews this owner's leases every third of the TTL until stop.
func (l *leases) renewLoop() {
	defer l.wg.Done()
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			l.renew()
		}
	}
}

func (l *leases) renew() {
	l.mu.Lock()
	keys := make([]string, 0, len(l.held))
	for k := range l.held {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	for _, k := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
		_ = l.change(ctx, k, func(map[string]lease, int64) error { return nil })
		cancel()
	}
}

// stop ends the renewals; leases still held expire within the TTL.
func (l *leases) stop() {
	close(l.done)
	l.wg.Wait()
}
