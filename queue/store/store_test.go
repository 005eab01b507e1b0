package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/store"
)

// jetStream starts a real nats-server with JetStream (file store) and returns its context.
func jetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, err := store.JetStream(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestBucketCreatesOnceAndKeepsSettings(t *testing.T) {
	js := jetStream(t)
	ctx := context.Background()
	want := jetstream.KeyValueConfig{Bucket: "B", History: 1, TTL: time.Hour}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 { // eight workers starting at once
		wg.Go(func() {
			_, err := store.Bucket(ctx, js, want)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a concurrent opener failed: %v", err)
		}
	}
	kv, err := store.Bucket(ctx, js, jetstream.KeyValueConfig{Bucket: "B", History: 1, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil || st.TTL() != time.Hour {
		t.Errorf("reopened bucket TTL %v (%v), want the existing hour kept", st.TTL(), err)
	}
}

func TestStreamAndConsumer(t *testing.T) {
	js := jetStream(t)
	ctx := context.Background()
	s, err := store.Stream(ctx, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	again, err := store.Stream(ctx, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"other.>"}})
	if err != nil || again.CachedInfo().Config.Subjects[0] != "s.>" {
		t.Fatalf("reopened stream %v (%v), want the existing subjects kept", again.CachedInfo().Config.Subjects, err)
	}
	c, err := store.Consumer(ctx, s, jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil || c.CachedInfo().Name != "C" {
		t.Fatalf("consumer: %v", err)
	}
}

func TestNoJetStream(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := store.JetStream(ctx, nc); !errors.Is(err, store.ErrNoJetStream) {
		t.Errorf("JetStream on a server without it: %v, want ErrNoJetStream", err)
	}
}
