package login

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/worker/codextest"
)

// memStore is an in-memory Coordinator with the semantics of a JetStream key-value bucket:
// revisions from one sequence, compare-and-set, watchers that get the current value first.
type memStore struct {
	mu    sync.Mutex
	seq   uint64
	vals  map[string][]byte
	revs  map[string]uint64
	subs  map[string][]chan memEntry
	puts  int
	fails bool // every call fails (a store that is down)
	hangs bool // with fails: Get and Put block until their context ends (an unreachable server)
}

type memEntry struct {
	v   []byte
	rev uint64
}

func newMemStore() *memStore {
	return &memStore{vals: map[string][]byte{}, revs: map[string]uint64{}, subs: map[string][]chan memEntry{}}
}

var errStoreDown = &testError{"memstore: down"}

type testError struct{ s string }

func (e *testError) Error() string { return e.s }

// down reports whether the store is down, after blocking until ctx ends if it hangs.
func (m *memStore) down(ctx context.Context) bool {
	m.mu.Lock()
	fails, hangs := m.fails, m.hangs
	m.mu.Unlock()
	if fails && hangs {
		<-ctx.Done()
	}
	return fails
}

func (m *memStore) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	if m.down(ctx) {
		return nil, 0, errStoreDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.vals[key], m.revs[key], nil
}

func (m *memStore) Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, bool, error) {
	if m.down(ctx) {
		return 0, false, errStoreDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.revs[key] != rev {
		return 0, false, nil
	}
	m.seq++
	m.puts++
	m.vals[key], m.revs[key] = append([]byte(nil), value...), m.seq
	for _, ch := range m.subs[key] {
		ch <- memEntry{m.vals[key], m.seq}
	}
	return m.seq, true, nil
}

// setDown makes every call fail (down; at once, or after hanging until its context ends) or
// work again; going down ends the watches.
func (m *memStore) setDown(down, hang bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fails, m.hangs = down, hang
	if down {
		for k, subs := range m.subs {
			for _, ch := range subs {
				close(ch)
			}
			delete(m.subs, k)
		}
	}
}

func (m *memStore) Watch(ctx context.Context, key string, update func([]byte, uint64)) error {
	ch := make(chan memEntry, 1024)
	m.mu.Lock()
	if m.fails {
		m.mu.Unlock()
		return errStoreDown
	}
	if v, ok := m.vals[key]; ok {
		ch <- memEntry{v, m.revs[key]}
	}
	m.subs[key] = append(m.subs[key], ch)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		subs := m.subs[key]
		for i, c := range subs {
			if c == ch {
				m.subs[key] = append(subs[:i], subs[i+1:]...)
				break
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-ch:
			if !ok {
				return errStoreDown
			}
			update(e.v, e.rev)
		}
	}
}

// raw returns every value the store holds, for leak checks.
func (m *memStore) raw() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for _, v := range m.vals {
		b.Write(v)
	}
	return b.String()
}

const alice = "alice"

// testKey is the pool key of the tests' shared logins.
const testKey = "a-test-pool-key"

// newLoginSim starts a simulator serving the account alice, whose logins live for lifetime.
func newLoginSim(t *testing.T, lifetime time.Duration) *codextest.Server {
	t.Helper()
	return newLoginSimWith(t, codextest.Options{TokenLifetime: lifetime})
}

// newLoginSimWith starts a simulator with opts serving the account alice.
func newLoginSimWith(t *testing.T, opts codextest.Options) *codextest.Server {
	t.Helper()
	opts.Accounts = []codextest.Account{{Name: alice, AccountID: "acct-alice-0123456789"}}
	return newSim(t, opts)
}

// writeLogin writes a new login of alice to dir/name as a Codex CLI auth.json with an extra
// field, mode 0640, and returns its path and the login.
func writeLogin(t *testing.T, srv *codextest.Server, dir, name string) (string, codextest.Login) {
	t.Helper()
	l, err := srv.Logins.Issue(alice)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	writeAuthJSON(t, path, l)
	return path, l
}

// writeAuthJSON writes l to path (atomically, as the Codex CLI would), with an unknown field.
func writeAuthJSON(t *testing.T, path string, l codextest.Login) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(l.AuthJSON(), &m); err != nil {
		t.Fatal(err)
	}
	m["extra_field"] = map[string]any{"kept": true}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := replaceFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

// openAuth opens an Auth on path against srv's token endpoint, closed at cleanup.
func openAuth(t *testing.T, srv *codextest.Server, path string, cfg AuthConfig) *Auth {
	t.Helper()
	cfg.File = path
	cfg.RefreshURL = srv.RefreshURL
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	a, err := OpenAuth(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// logBuffer returns a debug-level JSON logger writing to a buffer.
func logBuffer() (*slog.Logger, *testutil.SyncBuffer) {
	var buf testutil.SyncBuffer
	return slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// fileTokens reads the tokens of the auth file at path.
func fileTokens(t *testing.T, path string) tokens {
	t.Helper()
	tk, _, err := readAuthFile(path)
	if err != nil {
		t.Fatalf("auth file: %v", err)
	}
	return tk
}

// noSecrets fails when text holds any of the secrets.
func noSecrets(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%s leaks a secret (%.12s...)", what, s)
		}
	}
}

func loginSecrets(ls ...codextest.Login) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.AccessToken, l.RefreshToken, l.IDToken)
	}
	return out
}

// fileMode returns path's permission bits.
func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}
