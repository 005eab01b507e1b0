package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/worker/codex/login"
	"github.com/codexpool/codexpool/worker/codextest"
)

// credentialPerms are the permissions docs/security.md documents for the credential store, besides the
// worker's others.
var credentialPerms = &server.Permissions{
	Publish: &server.SubjectPermission{Allow: []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO.KV_CODEXPOOL_CREDENTIALS",
		"$JS.API.STREAM.CREATE.KV_CODEXPOOL_CREDENTIALS",
		"$JS.API.DIRECT.GET.KV_CODEXPOOL_CREDENTIALS.>",
		"$JS.API.CONSUMER.CREATE.KV_CODEXPOOL_CREDENTIALS.>",
		"$JS.API.CONSUMER.DELETE.KV_CODEXPOOL_CREDENTIALS.>",
		"$JS.FC.KV_CODEXPOOL_CREDENTIALS.>",
		"$KV.CODEXPOOL_CREDENTIALS.>",
	}},
	Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
}

// startCredentialServer starts a NATS server with JetStream and a user "w" limited to credentialPerms.
func startCredentialServer(t *testing.T) *server.Server {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: t.TempDir(),
		Users: []*server.User{{Username: "w", Password: "pw", Permissions: credentialPerms}}}
	ns := testutil.StartServer(t, opts)
	return ns
}

// TestCredentialStore: compare-and-set, watch, and every operation within the documented
// permissions (a violation fails the test).
func TestCredentialStore(t *testing.T) {
	ns := startCredentialServer(t)
	var mu sync.Mutex
	var violations []string
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("w", "pw"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			violations = append(violations, err.Error())
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := NewCredentialStore(ctx, nc, CredentialStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := NewCredentialStore(ctx, nc, CredentialStoreConfig{}); err != nil || s2 == nil {
		t.Fatalf("binding to the existing bucket: %v", err)
	}
	const key = "login_0123456789abcdef"
	if v, rev, err := s.Get(ctx, key); err != nil || v != nil || rev != 0 {
		t.Fatalf("Get of a new key = %q, %d, %v; want nothing", v, rev, err)
	}

	r1, ok, err := s.Put(ctx, key, []byte("one"), 0)
	if err != nil || !ok {
		t.Fatalf("create: %v %v", ok, err)
	}
	if _, ok, err := s.Put(ctx, key, []byte("again"), 0); err != nil || ok {
		t.Fatalf("second create = %v, %v; want a conflict", ok, err)
	}

	// A watch gets the current value first, then every update.
	var got []string
	var gotMu sync.Mutex
	seen := func() string {
		gotMu.Lock()
		defer gotMu.Unlock()
		return strings.Join(got, ",")
	}
	wctx, wcancel := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- s.Watch(wctx, key, func(v []byte, _ uint64) {
			gotMu.Lock()
			got = append(got, string(v))
			gotMu.Unlock()
		})
	}()
	waitFor(t, "the watch to see the current value", func() bool { return seen() == "one" })
	r2, ok, err := s.Put(ctx, key, []byte("two"), r1)
	if err != nil || !ok || r2 <= r1 {
		t.Fatalf("update at the current revision: %v %v", ok, err)
	}
	if _, ok, err := s.Put(ctx, key, []byte("stale"), r1); err != nil || ok {
		t.Fatalf("update at an old revision = %v, %v; want a conflict", ok, err)
	}
	if v, rev, err := s.Get(ctx, key); err != nil || string(v) != "two" || rev != r2 {
		t.Fatalf("Get = %q, %d, %v; want two at %d", v, rev, err, r2)
	}
	waitFor(t, "the watch to see the update", func() bool { return seen() == "one,two" })
	wcancel()
	if err := <-watchDone; !errors.Is(err, context.Canceled) {
		t.Errorf("Watch returned %v, want context.Canceled", err)
	}
	// A watch started later gets the current value first.
	late := make(chan string, 1)
	lctx, lcancel := context.WithCancel(ctx)
	go func() {
		_ = s.Watch(lctx, key, func(v []byte, _ uint64) {
			select {
			case late <- string(v):
			default:
			}
		})
	}()
	select {
	case v := <-late:
		if v != "two" {
			t.Errorf("a late watch got %q first, want two", v)
		}
	case <-time.After(waitTimeout):
		t.Error("a late watch got nothing")
	}
	lcancel()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Errorf("NATS error (missing permission?): %s", v)
	}
}

func TestCredentialStoreWithoutJetStream(t *testing.T) {
	ns := startServer(t) // the embedded server: JetStream off
	nc := connect(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := NewCredentialStore(ctx, nc, CredentialStoreConfig{}); !errors.Is(err, ErrNoJetStream) {
		t.Fatalf("got %v, want ErrNoJetStream", err)
	}
}

// TestCredentialStoreHoldsOnlySealedLogins: two workers share a login through a real bucket
// and refresh it; every raw value in the bucket is sealed and holds none of the tokens. Then a
// plaintext entry planted in the bucket is ignored: the auth file stays byte-equal.
func TestCredentialStoreHoldsOnlySealedLogins(t *testing.T) {
	ns := startCredentialServer(t)
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("w", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	store, err := NewCredentialStore(ctx, nc, CredentialStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	sim := codextest.NewServer(codextest.Options{Accounts: []codextest.Account{{Name: "alice", AccountID: "acct-alice-0123456789"}}})
	defer sim.Close()
	l, err := sim.Logins.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var auths []*login.Auth
	for _, name := range []string{"a.json", "b.json"} { // two machines
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, l.AuthJSON(), 0o600); err != nil {
			t.Fatal(err)
		}
		a, err := login.OpenAuth(login.AuthConfig{File: path, RefreshURL: sim.RefreshURL, Poll: 50 * time.Millisecond,
			Coordinator: store, ShareKey: "queue-test-pool-key"})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		auths = append(auths, a)
	}
	c0, _ := auths[0].Credentials()
	if _, err := auths[0].Unauthorized(ctx, c0); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	c0, _ = auths[0].Credentials()
	waitFor(t, "the other worker to get the refreshed tokens", func() bool {
		c1, _ := auths[1].Credentials()
		return c1.Token == c0.Token
	})
	secrets := []string{l.AccessToken, l.RefreshToken, l.IDToken, c0.Token}
	kv := credentialKV(t, ctx, nc)
	key := checkSealed(t, ctx, kv, secrets)

	before, _ := os.ReadFile(filepath.Join(dir, "b.json"))
	planted, _ := json.Marshal(map[string]any{"v": 2, "seq": 1 << 40,
		"tokens": map[string]string{"access_token": "at_planted", "refresh_token": "rt_planted"}})
	if _, err := kv.Put(ctx, key, planted); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both workers to ignore the planted entry", func() bool {
		return auths[0].Stats().Ignored == 1 && auths[1].Stats().Ignored == 1
	})
	if after, _ := os.ReadFile(filepath.Join(dir, "b.json")); !bytes.Equal(after, before) {
		t.Error("the planted entry changed an auth file")
	}
	if c1, _ := auths[1].Credentials(); c1.Token != c0.Token {
		t.Error("a worker adopted the planted tokens")
	}
}

// credentialKV opens the credentials bucket directly, to read and write raw values.
func credentialKV(t *testing.T, ctx context.Context, nc *nats.Conn) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, DefaultCredentialsBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// checkSealed fails when a raw value in kv is not sealed or holds one of secrets; it returns the
// one key there is.
func checkSealed(t *testing.T, ctx context.Context, kv jetstream.KeyValue, secrets []string) string {
	t.Helper()
	keys, err := kv.Keys(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v, %v; want one login", keys, err)
	}
	e, err := kv.Get(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(e.Value(), []byte("cxp2.")) {
		t.Errorf("the value at %s is not sealed", keys[0])
	}
	for _, s := range secrets {
		if bytes.Contains(e.Value(), []byte(s)) {
			t.Errorf("the value at %s holds a token in plaintext (%.12s...)", keys[0], s)
		}
	}
	return keys[0]
}
