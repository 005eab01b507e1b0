package login

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// plantedTokens are what an attacker able to write the store plants: tokens no issuer made,
// with a far-future exp, which the origin would answer with 401 and the token endpoint with
// refresh_token_invalidated.
func plantedTokens() tokens {
	iat := strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10) // as new as it can pass for
	return tokens{
		AccessToken:  jwt(`{"sub":"alice","exp":4102444800,"iat":` + iat + `}`),
		RefreshToken: "rt_planted_0123456789",
		IDToken:      jwt(`{"sub":"alice","exp":4102444800}`),
		AccountID:    "acct-alice-0123456789",
	}
}

// TestAuthIgnoresPlantedEntries: an entry that does not open under the pool key is never
// adopted: the auth file stays byte-equal, the origin never sees the planted tokens, serving
// goes on, the entry is counted and logged without its content, and the next claim overwrites it.
func TestAuthIgnoresPlantedEntries(t *testing.T) {
	pt := plantedTokens()
	plain, _ := json.Marshal(sharedLogin{V: shareVersion, Tokens: &pt, Seq: 1 << 40})
	for _, tc := range []struct {
		name  string
		value func(key string) []byte
	}{
		{name: "plaintext", value: func(string) []byte { return plain }},
		{name: "sealed with another key", value: func(key string) []byte {
			return newSealer([]byte("another-pool-key")).seal(key, sharedLogin{V: shareVersion, Tokens: &pt, Seq: 1 << 40})
		}},
		{name: "moved from another login's key", value: func(string) []byte {
			return newSealer([]byte(testKey)).seal("login_someone_else", sharedLogin{V: shareVersion, Tokens: &pt, Seq: 1 << 40})
		}},
		{name: "garbled", value: func(string) []byte {
			return []byte(sealPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { plantAndServe(t, tc.value) })
	}
}

func plantAndServe(t *testing.T, value func(key string) []byte) {
	srv := newLoginSim(t, time.Hour)
	path, l := writeLogin(t, srv, t.TempDir(), "auth.json")
	before, _ := os.ReadFile(path)
	store := newMemStore()
	key := loginKey(fileTokens(t, path))
	if _, ok, _ := store.Put(context.Background(), key, value(key), 0); !ok {
		t.Fatal("plant")
	}
	log, logs := logBuffer()
	a := openAuth(t, srv, path, AuthConfig{Coordinator: store, ShareKey: testKey, Logger: log})
	waitFor(t, "the planted entry to be seen and ignored", func() bool { return a.Stats().Ignored == 1 })
	c := newClient(srv, a)
	if _, failed, first := load(t, 300*time.Millisecond, c); failed != 0 {
		t.Fatalf("%d generations failed, first: %v", failed, first)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatalf("the auth file changed:\n%s", after)
	}
	if got := mustCreds(t, a).Token; got != l.AccessToken {
		t.Fatal("the Auth does not use the genuine login")
	}
	// A refresh reads the planted entry again, ignores it and overwrites it with a claim.
	if _, err := a.Unauthorized(context.Background(), mustCreds(t, a)); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	st := srv.Stats()
	if st.Unauthorized != 0 || st.RefreshInvalidated != 0 || st.RefreshOK != 1 {
		t.Errorf("origin: %d 401s, %d invalidated refreshes, %d ok; want 0, 0, 1 (the planted tokens never reach it)",
			st.Unauthorized, st.RefreshInvalidated, st.RefreshOK)
	}
	waitFor(t, "the store to hold the refreshed tokens, sealed", func() bool {
		raw, _, _ := store.Get(context.Background(), key)
		sl, err := a.seal.open(key, raw)
		return err == nil && sl.Tokens.same(fileTokens(t, path)) && sl.Claim == nil
	})
	if n := strings.Count(logs.String(), "does not open under the pool key"); n != 1 {
		t.Errorf("%d log lines about the planted entry, want 1", n)
	}
	noSecrets(t, "the log", logs.String(), plantedTokens().secrets()...)
}

// TestAuthFreshLoginBeatsAFarFutureExp: even a sealed entry (a key holder's mistake) with a
// far-future exp cannot pin the pool: a new `codex login` on one machine, whose tokens expire
// long before, is adopted there and reaches the other machine through the pool.
func TestAuthFreshLoginBeatsAFarFutureExp(t *testing.T) {
	srv := newLoginSim(t, time.Hour)
	dir := t.TempDir()
	p1, l := writeLogin(t, srv, dir, "a.json")
	p2 := filepath.Join(dir, "b.json")
	writeAuthJSON(t, p2, l)
	store := newMemStore()
	a1 := openAuth(t, srv, p1, AuthConfig{Coordinator: store, ShareKey: testKey, WorkerID: "one"})
	a2 := openAuth(t, srv, p2, AuthConfig{Coordinator: store, ShareKey: testKey, WorkerID: "two"})
	planted := plantedTokens()
	_, rev, _ := store.Get(context.Background(), a1.key)
	put(t, store, a1.key, a1.seal.seal(a1.key, sharedLogin{V: shareVersion, Tokens: &planted, Seq: 1 << 40}), rev)
	waitFor(t, "both to take the pool's (planted) tokens", func() bool {
		return mustCreds(t, a1).Token == planted.AccessToken && mustCreds(t, a2).Token == planted.AccessToken
	})

	fresh, err := srv.Logins.Issue(alice) // `codex login` on machine one
	if err != nil {
		t.Fatal(err)
	}
	writeAuthJSON(t, p1, fresh)
	waitFor(t, "the fresh login to reach both", func() bool {
		return mustCreds(t, a1).Token == fresh.AccessToken && mustCreds(t, a2).Token == fresh.AccessToken
	})
	c := newClient(srv, a2)
	if _, failed, first := load(t, 300*time.Millisecond, c); failed != 0 {
		t.Fatalf("%d generations failed, first: %v", failed, first)
	}
	if got := fileTokens(t, p2); got.RefreshToken != fresh.RefreshToken {
		t.Error("machine two's auth file does not hold the fresh login")
	}
}

func put(t *testing.T, store Coordinator, key string, value []byte, rev uint64) {
	t.Helper()
	if _, ok, err := store.Put(context.Background(), key, value, rev); !ok || err != nil {
		t.Fatalf("put: %v %v", ok, err)
	}
}

// TestAuthWithoutKeyDoesNotShare: a worker without a pool key does not touch the store (there
// is no plaintext sharing), says so once, and refreshes on its own.
func TestAuthWithoutKeyDoesNotShare(t *testing.T) {
	srv := newLoginSim(t, time.Hour)
	path, _ := writeLogin(t, srv, t.TempDir(), "auth.json")
	store := newMemStore()
	log, logs := logBuffer()
	a := openAuth(t, srv, path, AuthConfig{Coordinator: store, Logger: log})
	if _, err := a.Unauthorized(context.Background(), mustCreds(t, a)); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if store.puts != 0 || store.raw() != "" || a.Stats().Shared {
		t.Errorf("%d writes to the store, shared %v; want none, false", store.puts, a.Stats().Shared)
	}
	if n := strings.Count(logs.String(), "CODEXPOOL_CREDENTIALS_KEY"); n != 1 {
		t.Errorf("%d log lines naming CODEXPOOL_CREDENTIALS_KEY, want 1:\n%s", n, logs.String())
	}
	if srv.Stats().RefreshOK != 1 {
		t.Error("no refresh")
	}
}

// TestAuthStoreOutageRefreshesAlone: the pool's store goes down for 10 s while tokens live 2 s,
// failing at once or hanging every call until its timeout: no request fails, the workers (two
// processes of one machine, taking turns through the lock file) refresh alone, each says so
// once, and sharing resumes when the store is back — the pool then holds the tokens in use.
// CODEXPOOL_OUTAGE=2m runs it with 30 s tokens and a store down for 2 minutes.
func TestAuthStoreOutageRefreshesAlone(t *testing.T) {
	life, outage := 2*time.Second, 10*time.Second
	if d, err := time.ParseDuration(os.Getenv("CODEXPOOL_OUTAGE")); err == nil {
		life, outage = 30*time.Second, d
	}
	for _, tc := range []struct {
		name string
		hang bool
	}{
		{name: "fails at once"},
		{name: "hangs", hang: true},
	} {
		t.Run(tc.name, func(t *testing.T) { storeOutage(t, life, outage, tc.hang) })
	}
}

func storeOutage(t *testing.T, life, outage time.Duration, hang bool) {
	srv := newLoginSim(t, life)
	path, _ := writeLogin(t, srv, t.TempDir(), "auth.json")
	store := newMemStore()
	log, logs := logBuffer()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", logs.String())
		}
	})
	var auths []*Auth
	var clients []*testClient
	for i := range 2 {
		a := openAuth(t, srv, path, AuthConfig{Coordinator: store, ShareKey: testKey, Logger: log.With("w", i),
			StoreTimeout: life / 10})
		auths = append(auths, a)
		clients = append(clients, newClient(srv, a))
	}
	var nOK, nFail int64
	run := func(d time.Duration) {
		ok, failed, first := load(t, d, clients...)
		nOK, nFail = nOK+ok, nFail+failed
		if failed != 0 {
			t.Errorf("%d generations failed, first: %v", failed, first)
		}
	}
	run(life)
	store.setDown(true, hang)
	run(outage)
	store.setDown(false, false)
	run(2 * life)
	waitFor(t, "the pool to hold the tokens in use again", func() bool {
		raw, _, _ := store.Get(context.Background(), auths[0].key)
		sl, err := auths[0].seal.open(auths[0].key, raw)
		return err == nil && sl.Tokens.same(fileTokens(t, path)) && mustCreds(t, auths[1]).Token == sl.Tokens.AccessToken
	})
	var alone int64
	for _, a := range auths {
		st := a.Stats()
		alone += st.AloneRefreshes
		if st.StoreOutages > 1 || st.StoreDown {
			t.Errorf("stats %+v: want at most one outage, over", st)
		}
	}
	st := srv.Stats()
	if alone == 0 || st.RefreshReused != 0 || st.RefreshInvalidated != 0 {
		t.Errorf("%d refreshes alone, %d reused, %d invalidated; want some alone, none refused", alone, st.RefreshReused, st.RefreshInvalidated)
	}
	down, back := strings.Count(logs.String(), "store does not answer"), strings.Count(logs.String(), "answers again")
	if down == 0 || down > 2 || back != down {
		t.Errorf("%d outage log lines and %d recoveries for 2 workers; want one each per worker that noticed", down, back)
	}
	t.Logf("%d generations ok, %d failed; %d refreshes (%d alone) with a store down for %s and tokens living %s",
		nOK, nFail, st.RefreshOK, alone, outage, life)
}
