package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/schemas"
)

func startSessionServer(t *testing.T, dir string) *server.Server { return startSessionServerTB(t, dir) }

func startSessionServerTB(t testing.TB, dir string) *server.Server {
	t.Helper()
	return testutil.StartServer(t, &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: dir})
}

// TestSessionStore: a binding written by one connection is read by another, moves when written
// again, survives a restart of the NATS server, and expires TTL after its last write.
func TestSessionStore(t *testing.T) {
	dir := t.TempDir()
	ns := startSessionServer(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	a, err := NewSessionStore(ctx, connect(t, ns), SessionStoreConfig{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSessionStore(ctx, connect(t, ns), SessionStoreConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if b.TTL() != 2*time.Second {
		t.Errorf("second store TTL %s, want the existing bucket's 2s", b.TTL())
	}
	if acct, _, err := b.Binding(ctx, "k1"); err != nil || acct != "" {
		t.Fatalf("unbound key: got %q, %v; want \"\"", acct, err)
	}
	for _, acct := range []string{"team-a", "team-b"} {
		if err := a.Bind(ctx, "k1", acct); err != nil {
			t.Fatal(err)
		}
		got, at, err := b.Binding(ctx, "k1")
		if err != nil || got != acct || time.Since(at) > time.Minute {
			t.Fatalf("binding read by another connection: got %q written %s ago, %v; want %q just now", got, time.Since(at), err, acct)
		}
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	ns2 := startSessionServer(t, dir)
	c, err := NewSessionStore(ctx, connect(t, ns2), SessionStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := c.Binding(ctx, "k1"); err != nil || got != "team-b" {
		t.Fatalf("after a server restart: got %q, %v; want team-b", got, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _, err := c.Binding(ctx, "k1")
		if err != nil {
			t.Fatal(err)
		}
		if got == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the binding outlived its 2 s TTL by 8 s")
		}
		time.Sleep(100 * time.Millisecond) // polling a condition with a deadline
	}
}

func TestSessionStoreWithoutJetStream(t *testing.T) {
	ns := startServer(t) // JetStream off
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := NewSessionStore(ctx, connect(t, ns), SessionStoreConfig{}); !errors.Is(err, ErrNoJetStream) {
		t.Fatalf("got %v, want ErrNoJetStream", err)
	}
}

// TestSessionHeadersReachTheGenerator: the session headers of a request become its Session key.
func TestSessionHeadersReachTheGenerator(t *testing.T) {
	ns := startServer(t)
	got := make(chan string, 1)
	newService(t, ns, Config{}, genFunc(func(_ context.Context, r *schemas.Request, _ func([]byte) error) ([]byte, error) {
		got <- r.StickyKey
		return []byte(`{"id":"r","object":"response","status":"completed","output":[]}`), nil
	}))
	nc := connect(t, ns)
	hdr := nats.Header{}
	hdr.Set(schemas.HeaderStickySession, "conv-7")
	request(t, nc, "codex.generate", `{"input":"hi"}`, hdr)
	if s := <-got; s != schemas.SessionKey(hdr.Get) || s == "" {
		t.Errorf("Session %q, want the key of session_id conv-7", s)
	}
}
