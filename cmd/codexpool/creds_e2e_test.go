package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/codexpool/codexpool/worker/codextest"
)

// credSoak is how long the credential soaks run: CODEXPOOL_SOAK (e.g. 60s for the full run),
// 20s by default. Token lifetimes are a quarter of it, so every run sees four expiries.
func credSoak(t *testing.T) time.Duration {
	if os.Getenv("CODEXPOOL_SOAK") == "" {
		return 20 * time.Second
	}
	return soakDuration(t)
}

// loginCluster is a cluster (with JetStream, or not) whose simulator serves the account alice with
// logins living for life; the token endpoint answers after refreshLatency.
func loginCluster(t *testing.T, life, refreshLatency time.Duration, jetStream bool) *cluster {
	t.Helper()
	c, _ := newClusterWith(t, codextest.Options{
		Accounts:      []codextest.Account{{Name: "alice", AccountID: "acct-alice-e2e-0123456789"}},
		TokenLifetime: life, RefreshLatency: refreshLatency, Latency: 20 * time.Millisecond, Words: 4,
	}, func(o *server.Options) { o.JetStream, o.StoreDir = jetStream, t.TempDir() })
	return c
}

// writeLoginFile writes a new login of alice to path.
func writeLoginFile(t *testing.T, sim *codextest.Server, paths ...string) codextest.Login {
	t.Helper()
	l, err := sim.Logins.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if err := os.WriteFile(p, l.AuthJSON(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// loginEnv is the environment of a worker reading the login at path.
func loginEnv(c *cluster, path string) []string {
	return []string{"CODEXPOOL_CODEX_TOKEN=", "CODEXPOOL_CODEX_AUTH_FILE=" + path,
		"CODEXPOOL_CODEX_REFRESH_URL=" + c.sim.RefreshURL, "CODEXPOOL_WS_REUSE=false",
		"CODEXPOOL_LOG_LEVEL=info", "CODEXPOOL_CREDENTIALS_KEY=e2e-pool-secret"}
}

// steadyLoad sends one-shot requests at concurrency conc for d and returns the outcomes.
func steadyLoad(c *cluster, d time.Duration, conc int) (ok, failed int64, errs []string) {
	var nOK, nFail atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := c.client.Generate(ctx, request(fmt.Sprintf("soak %d %d", g, i), nil), nil)
				cancel()
				if err != nil {
					nFail.Add(1)
					mu.Lock()
					if len(errs) < 5 {
						errs = append(errs, err.Error())
					}
					mu.Unlock()
					continue
				}
				nOK.Add(1)
			}
		}()
	}
	wg.Wait()
	return nOK.Load(), nFail.Load(), errs
}

// checkRefreshSoak stops the workers, then checks the outcome of a credential soak whose load ran
// for took, with the first login made at born and logins living for life, and that no worker
// logged a token.
func checkRefreshSoak(t *testing.T, c *cluster, born time.Time, took, life time.Duration, ok, failed int64, errs []string, secrets []string, procs ...*proc) {
	t.Helper()
	for _, p := range procs { // then every refresh the endpoint answered has been logged
		p.stop(t, 30*time.Second)
	}
	st := c.sim.Stats()
	// A login is refreshed at 80 % of its life (codex.refreshLead): counted from the first
	// login's birth to the workers' exit, the pool has this many logins to refresh, plus one for
	// rounding to whole seconds.
	span := time.Since(born)
	logins := int64(float64(span)/(0.8*float64(life))) + 1
	t.Logf("%d requests ok, %d failed in %s; token lifetime %s; refresh calls %d (ok %d, reused %d, invalidated %d) in %s; upgrades %d; 401s %d",
		ok, failed, took.Round(time.Second), life, st.RefreshCalls, st.RefreshOK, st.RefreshReused, st.RefreshInvalidated,
		span.Round(100*time.Millisecond), st.UpgradesAccepted, st.Unauthorized)
	if failed != 0 {
		t.Errorf("%d requests failed, e.g. %v", failed, errs)
	}
	if st.RefreshReused != 0 || st.RefreshInvalidated != 0 {
		t.Errorf("%d refresh tokens reused, %d invalidated; want none", st.RefreshReused, st.RefreshInvalidated)
	}
	if st.RefreshCalls > logins || st.RefreshOK < int64(took/life)-1 {
		t.Errorf("%d refresh calls (%d ok) in %s of logins living %s: want one per login for the pool, at most %d",
			st.RefreshCalls, st.RefreshOK, span.Round(100*time.Millisecond), life, logins)
	}
	if ok == 0 || st.UpgradesAccepted < ok {
		t.Errorf("%d upgrades for %d requests: want a new socket per request", st.UpgradesAccepted, ok)
	}
	refreshed := 0
	for _, p := range procs {
		refreshed += strings.Count(p.out.String(), "codex: tokens refreshed")
	}
	noTokenLogged(t, secrets, procs...)
	if int64(refreshed) != st.RefreshOK {
		t.Errorf("workers logged %d refreshes, the token endpoint made %d", refreshed, st.RefreshOK)
	}
}

// fileSecrets returns the tokens in the auth files at paths.
func fileSecrets(t *testing.T, paths ...string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Tokens map[string]*string `json:"tokens"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for k, v := range f.Tokens {
			if v != nil && k != "account_id" {
				out = append(out, *v)
			}
		}
	}
	return out
}

// TestE2ECredentialsSharedFile (target 1): three worker processes share one auth.json; tokens
// expire every quarter of the run, every request opens a new socket. No request fails, the pool
// refreshes at most once per expiry, and no refresh token is ever reused.
//
// Without JetStream the processes take turns through the lock file beside the auth file.
func TestE2ECredentialsSharedFile(t *testing.T) {
	for _, js := range []bool{true, false} {
		t.Run(fmt.Sprintf("jetstream=%v", js), func(t *testing.T) { sharedFileSoak(t, js) })
	}
}

func sharedFileSoak(t *testing.T, jetStream bool) {
	dur := credSoak(t)
	if !jetStream {
		dur /= 2
	}
	life := dur / 4
	c := loginCluster(t, life, 0, jetStream)
	path := filepath.Join(t.TempDir(), "auth.json")
	born := time.Now()
	first := writeLoginFile(t, c.sim, path)
	var procs []*proc
	for i := range 3 {
		procs = append(procs, c.startWorker(fmt.Sprintf("cred%d", i), loginEnv(c, path)...))
	}
	start := time.Now()
	ok, failed, errs := steadyLoad(c, dur, 6)
	secrets := append(fileSecrets(t, path), first.AccessToken, first.RefreshToken, first.IDToken)
	checkRefreshSoak(t, c, born, time.Since(start), life, ok, failed, errs, secrets, procs...)
}

// TestE2ECredentialsCopies (target 2): two workers on separate copies of one login (as on two
// machines): the rotated tokens reach both through the pool, files included.
func TestE2ECredentialsCopies(t *testing.T) {
	dur := credSoak(t)
	life := dur / 4
	c := loginCluster(t, life, 0, true)
	p1 := filepath.Join(t.TempDir(), "auth.json")
	p2 := filepath.Join(t.TempDir(), "auth.json")
	born := time.Now()
	first := writeLoginFile(t, c.sim, p1, p2)
	w1 := c.startWorker("copy1", loginEnv(c, p1)...)
	w2 := c.startWorker("copy2", loginEnv(c, p2)...)
	start := time.Now()
	ok, failed, errs := steadyLoad(c, dur, 6)
	took := time.Since(start)
	waitCond(t, 10*time.Second, "both copies to hold the same tokens", func() bool {
		a, b := fileSecrets(t, p1), fileSecrets(t, p2)
		return strings.Join(a, ",") != "" && fmt.Sprint(sorted(a)) == fmt.Sprint(sorted(b))
	})
	if fmt.Sprint(sorted(fileSecrets(t, p1))) == fmt.Sprint(sorted([]string{first.AccessToken, first.RefreshToken, first.IDToken})) {
		t.Error("the copies were never rewritten")
	}
	secrets := append(fileSecrets(t, p1), first.AccessToken, first.RefreshToken, first.IDToken)
	checkRefreshSoak(t, c, born, took, life, ok, failed, errs, secrets, w1, w2)
}

// TestE2EStoppedWorkerSharesItsRefresh: a worker stopped while its refresh request is in flight
// (a rolling restart) waits for the answer and shares it with the pool before it leaves NATS: a
// worker started afterwards on an old copy of the login (another machine) adopts the new tokens
// instead of refreshing with the spent ones.
func TestE2EStoppedWorkerSharesItsRefresh(t *testing.T) {
	const life, latency = 4 * time.Second, 2 * time.Second
	c := loginCluster(t, life, latency, true)
	p1 := filepath.Join(t.TempDir(), "auth.json")
	p2 := filepath.Join(t.TempDir(), "auth.json")
	old := writeLoginFile(t, c.sim, p1, p2)
	w1 := c.startWorker("restart1", loginEnv(c, p1)...)
	// The refresh is due at 80 % of the login's life; once the endpoint has rotated the token,
	// its answer is latency away.
	waitCond(t, life+5*time.Second, "the refresh to reach the token endpoint", func() bool { return c.sim.Stats().RefreshOK == 1 })
	w1.stop(t, 30*time.Second)
	if !strings.Contains(w1.out.String(), "codex: tokens refreshed") {
		t.Fatal("the stopped worker dropped the answer of its refresh")
	}
	w2 := c.startWorker("restart2", loginEnv(c, p2)...)
	waitCond(t, 10*time.Second, "the late worker's copy to hold the rotated tokens", func() bool {
		return fmt.Sprint(sorted(fileSecrets(t, p1))) == fmt.Sprint(sorted(fileSecrets(t, p2)))
	})
	if _, err := c.client.Generate(ctxT(t, 20*time.Second), request("after the restart", nil), nil); err != nil {
		t.Fatalf("a request after the restart: %v", err)
	}
	st := c.sim.Stats()
	if st.RefreshReused != 0 || st.RefreshInvalidated != 0 {
		t.Errorf("%d refresh tokens reused, %d invalidated; want none", st.RefreshReused, st.RefreshInvalidated)
	}
	noTokenLogged(t, append(fileSecrets(t, p1), old.AccessToken, old.RefreshToken, old.IDToken), w1, w2)
}

// noTokenLogged fails the test if any of procs logged one of secrets.
func noTokenLogged(t *testing.T, secrets []string, procs ...*proc) {
	t.Helper()
	for _, p := range procs {
		out := p.out.String()
		for _, s := range secrets {
			if s != "" && strings.Contains(out, s) {
				t.Errorf("worker %s logged a token", p.id)
			}
		}
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// TestE2EHTTPFallback (target 3): an origin that refuses WebSockets is served over HTTP, one-shot
// and streamed; once it accepts them again the worker is back on WebSockets within
// CODEXPOOL_WS_RETRY_AFTER + 5 s.
func TestE2EHTTPFallback(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 5, WSOff: true})
	const retry = 3 * time.Second
	c.startWorker("http1", "CODEXPOOL_WS_RETRY_AFTER="+retry.String(), "CODEXPOOL_LOG_LEVEL=info")
	for i := range 20 {
		ctx := ctxT(t, 20*time.Second)
		prompt := fmt.Sprintf("http %d", i)
		if i%2 == 0 {
			if _, err := c.client.Generate(ctx, request(prompt, nil), nil); err != nil {
				t.Fatalf("one-shot %d: %v", i, err)
			}
			continue
		}
		var text strings.Builder
		_, err := c.client.Stream(ctx, request(prompt, map[string]any{"stream": true}), nil, func(ev []byte) error {
			var e struct{ Type, Delta string }
			_ = json.Unmarshal(ev, &e)
			if e.Type == "response.output_text.delta" {
				text.WriteString(e.Delta)
			}
			return nil
		})
		if err != nil || text.String() != codextest.Answer(prompt, 5) {
			t.Fatalf("stream %d: %v, text %q", i, err, text.String())
		}
	}
	st := c.sim.Stats()
	if st.SSEResponses != 20 || st.UpgradesAccepted != 0 {
		t.Fatalf("origin: %d HTTP responses, %d upgrades; want 20 and 0", st.SSEResponses, st.UpgradesAccepted)
	}
	c.sim.Limits.SetWSOff(false)
	allowed := time.Now()
	for c.sim.Stats().UpgradesAccepted == 0 {
		if time.Since(allowed) > retry+5*time.Second {
			t.Fatalf("no WebSocket %s after the origin allowed them again", time.Since(allowed))
		}
		if _, err := c.client.Generate(ctxT(t, 20*time.Second), request("probe", nil), nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("20 requests over HTTP; WebSockets resumed %s after the origin allowed them (CODEXPOOL_WS_RETRY_AFTER=%s)",
		time.Since(allowed).Round(10*time.Millisecond), retry)
}
