package login

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// load runs generations on every client, one after another per client with a new socket each,
// until d has passed, and returns how many failed (and the first error).
func load(t *testing.T, d time.Duration, clients ...*testClient) (ok, failed int64, first error) {
	t.Helper()
	var nOK, nFail atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(end); n++ {
				err := c.Generate(context.Background(), fmt.Sprintf("c%d n%d", i, n))
				if err != nil {
					nFail.Add(1)
					once.Do(func() { first = err })
					continue
				}
				nOK.Add(1)
			}
		}()
	}
	wg.Wait()
	return nOK.Load(), nFail.Load(), first
}

// loadOverLifetimes runs the clients for three token lifetimes and fails when a generation failed,
// a refresh token was reused, fewer than two refreshes succeeded, or there was more than one
// refresh call per lifetime.
func loadOverLifetimes(t *testing.T, srv *codextest.Server, life time.Duration, clients ...*testClient) {
	t.Helper()
	start := time.Now()
	_, failed, first := load(t, 3*life, clients...)
	if failed != 0 {
		t.Fatalf("%d generations failed, first: %v", failed, first)
	}
	st := srv.Stats()
	expiries := int64(time.Since(start)/life) + 1
	if st.RefreshReused != 0 || st.RefreshCalls > expiries || st.RefreshOK < 2 {
		t.Errorf("%d refresh calls (%d reused) in %d token lifetimes; want at most one per lifetime and none reused",
			st.RefreshCalls, st.RefreshReused, expiries)
	}
}

// TestAuthRefreshKeepsTheLoginAlive: with short-lived tokens, generations keep succeeding past
// several expiries; the Auth refreshes before each expiry (not after a 401), writes the rotated
// tokens to the file keeping its mode and unknown fields, and never logs a token.
func TestAuthRefreshKeepsTheLoginAlive(t *testing.T) {
	const life = 2 * time.Second
	srv := newLoginSim(t, life)
	path, l := writeLogin(t, srv, t.TempDir(), "auth.json")
	log, logs := logBuffer()
	a := openAuth(t, srv, path, AuthConfig{Logger: log})
	c := newClient(srv, a)

	ok, failed, first := load(t, 3*life, c)
	if failed != 0 {
		t.Fatalf("%d of %d generations failed, first: %v", failed, ok+failed, first)
	}
	st := srv.Stats()
	if st.RefreshOK < 2 || st.RefreshCalls > 4 || st.RefreshReused != 0 || st.Unauthorized != 0 {
		t.Errorf("refreshes: %d calls, %d ok, %d reused, %d 401s; want 2 to 4 calls, all ok, no 401 (refreshed before expiry)",
			st.RefreshCalls, st.RefreshOK, st.RefreshReused, st.Unauthorized)
	}
	ft := fileTokens(t, path)
	if ft.RefreshToken == l.RefreshToken || ft.LastRefresh.IsZero() || !ft.expiry().After(l.ExpiresAt) {
		t.Errorf("the auth file was not rewritten with rotated tokens")
	}
	raw, _ := os.ReadFile(path)
	if !bytes.Contains(raw, []byte(`"extra_field"`)) || !bytes.Contains(raw, []byte(`"auth_mode": "chatgpt"`)) {
		t.Errorf("the rewrite lost fields:\n%s", raw)
	}
	if m := fileMode(t, path); m != 0o640 {
		t.Errorf("file mode %v after the rewrite, want 0640", m)
	}
	if as := a.Stats(); as.Refreshes < 2 || as.RefreshFailures != 0 || as.OutOfService {
		t.Errorf("stats %+v", as)
	}
	noSecrets(t, "the log", logs.String(), append(loginSecrets(l), ft.secrets()...)...)
	t.Logf("%d generations over %s, %d refreshes", ok, 3*life, st.RefreshOK)
}

// TestAuthOneRefresherPerFile: Auths sharing one file (as worker processes on one machine do)
// take turns through the lock file: one refresh per expiry, no reuse.
func TestAuthOneRefresherPerFile(t *testing.T) {
	const life = 2 * time.Second
	srv := newLoginSim(t, life)
	path, _ := writeLogin(t, srv, t.TempDir(), "auth.json")
	var clients []*testClient
	for range 3 {
		a := openAuth(t, srv, path, AuthConfig{})
		clients = append(clients, newClient(srv, a))
	}
	loadOverLifetimes(t, srv, life, clients...)
}

// TestAuthCopiesShareThroughTheCoordinator: two copies of one login (two machines) with a shared
// Coordinator: one refresh per expiry, and the rotated tokens reach both, files included.
func TestAuthCopiesShareThroughTheCoordinator(t *testing.T) {
	const life = 2 * time.Second
	srv := newLoginSim(t, life)
	dir := t.TempDir()
	p1, l := writeLogin(t, srv, dir, "a.json")
	p2 := filepath.Join(dir, "b.json")
	writeAuthJSON(t, p2, l)
	store := newMemStore()
	const key = "a-pool-secret"
	log, logs := logBuffer()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", logs.String())
		}
	})
	a1 := openAuth(t, srv, p1, AuthConfig{Coordinator: store, ShareKey: key, WorkerID: "one", Logger: log.With("w", 1)})
	a2 := openAuth(t, srv, p2, AuthConfig{Coordinator: store, ShareKey: key, WorkerID: "two", Logger: log.With("w", 2)})
	c1 := newClient(srv, a1)
	c2 := newClient(srv, a2)
	loadOverLifetimes(t, srv, life, c1, c2)
	waitFor(t, "both copies to hold the same tokens", func() bool {
		c1, _ := a1.Credentials()
		c2, _ := a2.Credentials()
		return c1.Token == c2.Token && fileTokens(t, p1).same(fileTokens(t, p2))
	})
	s1, s2 := a1.Stats(), a2.Stats()
	if s1.FromPool+s2.FromPool == 0 || !s1.Shared {
		t.Errorf("stats %+v %+v: want tokens received from the pool", s1, s2)
	}
	noSecrets(t, "the store", store.raw(), append(loginSecrets(l), fileTokens(t, p1).secrets()...)...)
}

// TestAuthLateJoinerAdoptsThePoolsTokens: a worker starting with an old copy of the login (its
// refresh token already rotated by the pool) takes the pool's tokens and never spends the old one.
func TestAuthLateJoinerAdoptsThePoolsTokens(t *testing.T) {
	srv := newLoginSim(t, time.Hour)
	dir := t.TempDir()
	p1, l := writeLogin(t, srv, dir, "a.json")
	p2 := filepath.Join(dir, "b.json")
	writeAuthJSON(t, p2, l) // the old copy
	store := newMemStore()
	a1 := openAuth(t, srv, p1, AuthConfig{Coordinator: store, ShareKey: testKey})
	if _, err := a1.Unauthorized(context.Background(), mustCreds(t, a1)); err != nil {
		t.Fatal(err) // forces a refresh: the pool now has rotated tokens
	}
	a2 := openAuth(t, srv, p2, AuthConfig{Coordinator: store, ShareKey: testKey})
	waitFor(t, "the late joiner to adopt the pool's tokens", func() bool {
		return mustCreds(t, a2).Token == mustCreds(t, a1).Token
	})
	if st := srv.Stats(); st.RefreshCalls != 1 || st.RefreshReused != 0 {
		t.Errorf("%d refresh calls, %d reused; want 1 and 0", st.RefreshCalls, st.RefreshReused)
	}
	if !fileTokens(t, p2).same(fileTokens(t, p1)) {
		t.Error("the late joiner's file was not updated")
	}
}

func mustCreds(t *testing.T, a *Auth) Credentials {
	t.Helper()
	c, err := a.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAuthReloadsTheFile: a new login written by someone else is picked up by the poll.
func TestAuthReloadsTheFile(t *testing.T) {
	srv := newLoginSim(t, time.Hour)
	path, _ := writeLogin(t, srv, t.TempDir(), "auth.json")
	a := openAuth(t, srv, path, AuthConfig{})
	l2, _ := srv.Logins.Issue(alice)
	writeAuthJSON(t, path, l2)
	waitFor(t, "the new login", func() bool { return mustCreds(t, a).Token == l2.AccessToken })
	if st := a.Stats(); st.Reloads != 1 {
		t.Errorf("%d reloads, want 1", st.Reloads)
	}
	// A mangled file keeps the current login.
	if err := os.WriteFile(path, []byte(`{"tokens":`), 0o600); err != nil {
		t.Fatal(err)
	}
	a.reload()
	if got := mustCreds(t, a).Token; got != l2.AccessToken {
		t.Error("a mangled auth file replaced the working login")
	}
}

// TestAuthUnauthorizedRereadsFirst: a 401 after another process wrote new tokens is cured by
// reading the file: no refresh.
func TestAuthUnauthorizedRereadsFirst(t *testing.T) {
	srv := newLoginSim(t, time.Hour)
	path, l := writeLogin(t, srv, t.TempDir(), "auth.json")
	a := openAuth(t, srv, path, AuthConfig{Poll: time.Hour})
	old := mustCreds(t, a)
	l2, _ := srv.Logins.Issue(alice)
	writeAuthJSON(t, path, l2)
	got, err := a.Unauthorized(context.Background(), old)
	if err != nil || got.Token != l2.AccessToken {
		t.Fatalf("Unauthorized = %v, %v; want the new login's token", got.Token == l.AccessToken, err)
	}
	if n := srv.Stats().RefreshCalls; n != 0 {
		t.Errorf("%d refresh calls, want 0 (the re-read cured the 401)", n)
	}
}

// TestAuthUnauthorizedRefreshesOncePer30s: a 401 the re-read does not cure refreshes; a 401 for
// the refreshed token right after does not refresh again.
func TestAuthUnauthorizedRefreshesOncePer30s(t *testing.T) {
	srv := newLoginSim(t, time.Hour)
	path, _ := writeLogin(t, srv, t.TempDir(), "auth.json")
	a := openAuth(t, srv, path, AuthConfig{})
	old := mustCreds(t, a)
	var wg sync.WaitGroup
	results := make([]Credentials, 8)
	for i := range results { // many 401s at once: one refresh
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = a.Unauthorized(context.Background(), old)
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.Token == "" || r.Token == old.Token {
			t.Fatalf("a concurrent 401 did not get the refreshed token")
		}
	}
	_, err := a.Unauthorized(context.Background(), results[0])
	e := wantError(t, err, 401, schemas.CodeUpstreamUnauthorized)
	if !strings.Contains(e.Message, "no new refresh") {
		t.Errorf("message %q", e.Message)
	}
	if n := srv.Stats().RefreshCalls; n != 1 {
		t.Errorf("%d refresh calls, want 1", n)
	}
}

// spend refreshes tok at srv's token endpoint, as another client would.
func spend(t *testing.T, srv *codextest.Server, tok string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"grant_type": "refresh_token", "refresh_token": tok, "client_id": DefaultClientID})
	resp, err := http.Post(srv.RefreshURL, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != 200 {
		t.Fatalf("spend: HTTP %d", resp.StatusCode)
	}
}

// TestAuthHostileTokenEndpoint: slow, failing, garbled and buggy answers never lose the working
// credentials, never reach the file or the log, and are not retried blindly.
func TestAuthHostileTokenEndpoint(t *testing.T) {
	for _, tc := range []struct {
		fault codextest.RefreshFault
		// after: what the Auth holds once the fault has played out
		wantRefreshed bool // a later attempt got new tokens
		wantDown      bool // the rotation was lost: the retry is a reuse, the account is out
	}{
		{fault: codextest.RefreshFault500, wantRefreshed: true},
		{fault: codextest.RefreshFaultGarbage, wantDown: true},
		{fault: codextest.RefreshFaultNoRefresh, wantRefreshed: true},
		{fault: codextest.RefreshFaultSlow, wantDown: true},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			srv := newLoginSim(t, time.Hour)
			path, l := writeLogin(t, srv, t.TempDir(), "auth.json")
			log, logs := logBuffer()
			a := openAuth(t, srv, path, AuthConfig{Logger: log, RefreshTimeout: 300 * time.Millisecond})
			old := mustCreds(t, a)
			srv.Faults.Refresh(1, tc.fault)
			_, err := a.Unauthorized(context.Background(), old)
			if tc.fault == codextest.RefreshFaultNoRefresh {
				if err != nil {
					t.Fatalf("no_refresh: %v, want the new access token", err)
				}
			} else if err == nil {
				t.Fatalf("%s: the refresh succeeded", tc.fault)
			} else if e, ok := schemas.AsError(err); !ok || e.Status != 401 {
				t.Fatalf("%s: got %v, want a 401", tc.fault, err)
			}
			// The working credentials are kept (or, no_refresh, replaced by the new access token).
			cur, cerr := a.Credentials()
			if cerr != nil || (tc.fault != codextest.RefreshFaultNoRefresh && cur.Token != old.Token) {
				t.Fatalf("after the fault: %v; want the old working token", cerr)
			}
			ft := fileTokens(t, path)
			if tc.fault == codextest.RefreshFaultNoRefresh {
				if ft.RefreshToken != l.RefreshToken || ft.AccessToken == l.AccessToken {
					t.Error("no_refresh: want the new access token and the old refresh token in the file")
				}
			} else if !ft.same(fileTokens(t, path)) || ft.AccessToken != l.AccessToken {
				t.Error("the file changed after a failed refresh")
			}
			// The next attempt (after the backoff) re-reads first, then tries once.
			a.mu.Lock()
			a.sched.retryAt = time.Time{}
			a.sched.kickedAt = time.Time{}
			a.mu.Unlock()
			creds := mustCreds(t, a)
			_, err = a.Unauthorized(context.Background(), creds)
			st := srv.Stats()
			switch {
			case tc.wantDown:
				e := wantError(t, err, 401, schemas.CodeUpstreamUnauthorized)
				if !strings.Contains(e.Message, "log in again") || st.RefreshReused != 1 {
					t.Errorf("after the lost rotation: %q, %d reused; want out of service after one reuse", e.Message, st.RefreshReused)
				}
			case tc.wantRefreshed && tc.fault == codextest.RefreshFaultNoRefresh:
				// The old refresh token was spent by the buggy answer: the retry is a reuse.
				if err == nil || st.RefreshReused != 1 {
					t.Errorf("no_refresh retry: %v, %d reused", err, st.RefreshReused)
				}
			case tc.wantRefreshed:
				if err != nil || st.RefreshOK != 1 {
					t.Errorf("retry after %s: %v, %d ok; want a refresh", tc.fault, err, st.RefreshOK)
				}
			}
			if st.RefreshCalls != 2 {
				t.Errorf("%d refresh calls, want 2 (the fault and one retry)", st.RefreshCalls)
			}
			noSecrets(t, "the log", logs.String(), append(loginSecrets(l), fileTokens(t, path).secrets()...)...)
		})
	}
}

// TestAuthTimedOutRefreshIsNotRetriedBlindly: after a refresh timed out (the endpoint spent the
// token), the login another holder wrote meanwhile is found by the re-read before any retry.
func TestAuthTimedOutRefreshIsNotRetriedBlindly(t *testing.T) {
	srv := newLoginSim(t, time.Hour)
	path, _ := writeLogin(t, srv, t.TempDir(), "auth.json")
	a := openAuth(t, srv, path, AuthConfig{RefreshTimeout: 200 * time.Millisecond, Poll: time.Hour})
	srv.Faults.Refresh(1, codextest.RefreshFaultSlow)
	old := mustCreds(t, a)
	if _, err := a.Unauthorized(context.Background(), old); err == nil {
		t.Fatal("a timed-out refresh succeeded")
	}
	l2, _ := srv.Logins.Issue(alice) // what the other holder got
	writeAuthJSON(t, path, l2)
	a.mu.Lock()
	a.sched.retryAt = time.Time{}
	a.mu.Unlock()
	a.refresh(false) // the retry: due (backoff over), but the re-read comes first
	if got := mustCreds(t, a).Token; got != l2.AccessToken {
		t.Error("the retry did not re-read the file first")
	}
	if st := srv.Stats(); st.RefreshCalls != 1 || st.RefreshReused != 0 {
		t.Errorf("%d refresh calls, %d reused; want 1 and 0", st.RefreshCalls, st.RefreshReused)
	}
}

// TestAuthCloseFinishesARefreshInFlight: an Auth closed while its refresh request is in flight
// (a worker stopping) keeps the answer: the endpoint has spent the old refresh token, so the file
// and the pool must get the new one, and the next holder of the login refreshes without a reuse.
func TestAuthCloseFinishesARefreshInFlight(t *testing.T) {
	srv := newLoginSimWith(t, codextest.Options{TokenLifetime: time.Hour, RefreshLatency: 300 * time.Millisecond})
	path, l := writeLogin(t, srv, t.TempDir(), "auth.json")
	store := newMemStore()
	a := openAuth(t, srv, path, AuthConfig{Coordinator: store, ShareKey: testKey, Poll: time.Hour})
	old := mustCreds(t, a)
	go func() { _, _ = a.Unauthorized(context.Background(), old) }()
	waitFor(t, "the endpoint to rotate the token", func() bool { return srv.Stats().RefreshOK == 1 })
	a.Close() // the answer is still on its way

	ft := fileTokens(t, path)
	if ft.RefreshToken == l.RefreshToken {
		t.Fatal("the file still holds the spent refresh token: the answer was dropped")
	}
	value, _, _ := store.Get(context.Background(), a.key)
	if sl, ok := a.decode(value, 1); !ok || sl.Tokens == nil || sl.Tokens.RefreshToken != ft.RefreshToken || sl.Claim != nil {
		t.Fatal("the pool does not hold the new tokens without a claim")
	}
	b := openAuth(t, srv, path, AuthConfig{Coordinator: store, ShareKey: testKey, Poll: time.Hour})
	if _, err := b.Unauthorized(context.Background(), mustCreds(t, b)); err != nil {
		t.Fatalf("the next holder's refresh: %v", err)
	}
	if st := srv.Stats(); st.RefreshOK != 2 || st.RefreshReused != 0 {
		t.Errorf("%d refreshes ok, %d reused; want 2 and none", st.RefreshOK, st.RefreshReused)
	}
}

// TestAuthDeadClaimIsTakenOver: a claim left by a worker that died is taken over after claimTTL
// of no change; a live one makes the others wait.
func TestAuthDeadClaimIsTakenOver(t *testing.T) {
	srv := newLoginSim(t, time.Hour)
	path, l := writeLogin(t, srv, t.TempDir(), "auth.json")
	store := newMemStore()
	a := openAuth(t, srv, path, AuthConfig{Coordinator: store, ShareKey: testKey})
	cur := fileTokens(t, path)
	dead := sharedLogin{V: shareVersion, Tokens: &cur, Claim: &shareClaim{By: "dead-worker", At: time.Now()}}
	if _, ok, _ := store.Put(context.Background(), a.key, a.seal.seal(a.key, dead), 0); !ok {
		t.Fatal("put")
	}
	if res, _, _ := a.claim(cur); res != claimBusy {
		t.Fatalf("claim = %v, want busy while the claim is fresh", res)
	}
	a.mu.Lock()
	a.share.claimSeen = time.Now().Add(-claimTTL) // the claim has not changed for claimTTL
	a.mu.Unlock()
	if res, _, _ := a.claim(cur); res != claimHeld {
		t.Fatalf("claim = %v, want held after taking over", res)
	}
	if l.RefreshToken != cur.RefreshToken {
		t.Fatal("test setup: the file is not the login")
	}
}

func TestLoginKeyHidesTheIdentity(t *testing.T) {
	srv := newLoginSim(t, time.Hour)
	l1, _ := srv.Logins.Issue(alice)
	l2, _ := srv.Logins.Issue(alice)
	k1 := loginKey(tokens{IDToken: l1.IDToken, AccessToken: l1.AccessToken, AccountID: l1.AccountID})
	k2 := loginKey(tokens{IDToken: l2.IDToken, AccessToken: l2.AccessToken, AccountID: l2.AccountID})
	if k1 == "" || k1 != k2 {
		t.Errorf("keys %q, %q: want one key per identity", k1, k2)
	}
	if strings.Contains(k1, alice) || strings.Contains(k1, l1.AccountID) {
		t.Errorf("key %q names the account", k1)
	}
	if loginKey(tokens{APIKey: "sk-123"}) != "" {
		t.Error("an API key login got a key")
	}
}
