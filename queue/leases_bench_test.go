package queue

import (
	"context"
	"testing"
)

// BenchmarkLeaseAcquireRelease is what max_concurrent costs a generation: one slot leased and
// given back through a real JetStream server on loopback (the slot free: one Create, one
// Delete).
func BenchmarkLeaseAcquireRelease(b *testing.B) {
	ns := startSessionServerTB(b, b.TempDir())
	s, err := NewLeaseStore(context.Background(), connect(b, ns), LeaseStoreConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for b.Loop() {
		release, ok, err := s.Acquire(ctx, "bench", 2)
		if err != nil || !ok {
			b.Fatalf("acquire: %v %v", ok, err)
		}
		release()
	}
}

// BenchmarkStickyBinding is what sticky routing costs a turn of a bound session: one read of
// its binding (a refresh write happens once a StickyRefresh).
func BenchmarkStickyBinding(b *testing.B) {
	ns := startSessionServerTB(b, b.TempDir())
	s, err := NewSessionStore(context.Background(), connect(b, ns), SessionStoreConfig{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Bind(ctx, "k", "team-a"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if acct, _, err := s.Binding(ctx, "k"); err != nil || acct != "team-a" {
			b.Fatalf("binding: %q %v", acct, err)
		}
	}
}
