package queue

import (
	"context"
	"testing"
	"time"
)

// TestLeaseStore: two workers share an account's 2 slots; held slots outlive the TTL while
// renewed; a released slot is free at once; the slots of a store that stopped renewing (a
// killed worker) come back within about the TTL.
func TestLeaseStore(t *testing.T) {
	ns := startSessionServer(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl = time.Second
	a, err := NewLeaseStore(ctx, connect(t, ns), LeaseStoreConfig{TTL: ttl, Owner: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewLeaseStore(ctx, connect(t, ns), LeaseStoreConfig{Owner: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	acquire := func(s *LeaseStore) (func(), bool) {
		t.Helper()
		release, ok, err := s.Acquire(ctx, "acct1", 2)
		if err != nil {
			t.Fatal(err)
		}
		return release, ok
	}
	r1, ok1 := acquire(a)
	_, ok2 := acquire(a)
	if !ok1 || !ok2 {
		t.Fatalf("first two slots: %v %v, want both", ok1, ok2)
	}
	if _, ok := acquire(b); ok {
		t.Fatal("a third slot of 2 was granted")
	}
	if _, ok, _ := b.Acquire(ctx, "acct2", 2); !ok {
		t.Fatal("another account's slot was refused")
	}
	renewed := time.Now().Add(3 * ttl)
	for time.Now().Before(renewed) {
		if _, ok := acquire(b); ok {
			t.Fatal("a renewed slot expired")
		}
		time.Sleep(200 * time.Millisecond) // polling: the slots must stay held throughout
	}
	r1()
	r1() // twice is harmless
	if _, ok := acquire(b); !ok {
		t.Fatal("a released slot is not free")
	}
	a.Close() // a is killed: its other slot is no longer renewed
	start := time.Now()
	for {
		if _, ok := acquire(b); ok {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the slot of a store that stopped renewing did not come back within 10 s")
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
	t.Logf("a dead holder's slot came back after %s (TTL %s)", time.Since(start).Round(10*time.Millisecond), ttl)
}
