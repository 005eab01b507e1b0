package worker_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/egress/proxytest"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// onlyViaProxy maps the name origin.test to sim in px: a client that reaches
// http://origin.test:PORT did so through px (the name resolves nowhere else). It returns that
// URL.
func onlyViaProxy(t *testing.T, px *proxytest.Connect, sim *codextest.Server) string {
	t.Helper()
	u, err := url.Parse(sim.URL)
	if err != nil {
		t.Fatal(err)
	}
	name := "origin.test:" + u.Port()
	px.Hosts = map[string]string{name: u.Host}
	return "http://" + name
}

// expiredLogin writes l to a new auth.json with its access token replaced by one that expired a
// minute ago (the refresh token stays valid): the Auth refreshes it at once.
func expiredLogin(t *testing.T, l codextest.Login) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(p, l.Expired(time.Now()).AuthJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProxyCarriesUpgradesFallbackAndRefresh: an account's upgrades, its HTTP fallback (the
// origin answers 426) and the refresh of its expired login all go through its proxy: the origin
// and the token endpoint are named origin.test, which only the proxy resolves, and the
// simulator counts the refresh, the upgrades and the HTTP streams it served.
func TestProxyCarriesUpgradesFallbackAndRefresh(t *testing.T) {
	sim := newAccountsSim(t, codextest.Options{}, codextest.Account{Name: "alice", AccountID: "acct-alice-0123456789"})
	px := proxytest.NewConnect(t, "alice", "pr0xyPW-a")
	origin := onlyViaProxy(t, px, sim)
	l, err := sim.Logins.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{ID: "w-proxy", URL: origin, RefreshURL: origin + codextest.RefreshPath, NoReuse: true,
		Accounts: []worker.Account{{Name: "alice", AuthFile: expiredLogin(t, l), ProxyURL: px.URLWith("alice", "pr0xyPW-a")}}}, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	ctx := testCtx(t)
	for i := range 2 {
		if err := generate(ctx, w, fmt.Sprintf("over the socket %d", i), ""); err != nil {
			t.Fatalf("generation %d over WebSocket: %v", i, err)
		}
	}
	sim.Limits.SetWSOff(true)
	for i := range 2 {
		if err := generate(ctx, w, fmt.Sprintf("over HTTP %d", i), ""); err != nil {
			t.Fatalf("generation %d over the HTTP fallback: %v", i, err)
		}
	}
	st := sim.Stats()
	a := st.Accounts["alice"]
	t.Logf("proxy tunnels %d; simulator: refreshes %d (ok %d), upgrades %d, HTTP streams %d", px.Tunnels.Load(),
		a.RefreshCalls, a.RefreshOK, a.UpgradesAccepted, a.SSEResponses)
	if a.RefreshOK < 1 || a.UpgradesAccepted != 2 || a.SSEResponses != 2 {
		t.Errorf("simulator: refresh ok %d, upgrades %d, HTTP streams %d; want >= 1, 2, 2", a.RefreshOK, a.UpgradesAccepted, a.SSEResponses)
	}
	// Each upgrade is a tunnel of its own (NoReuse); the refresh and the HTTP streams at least one more.
	if n := px.Tunnels.Load(); n < 3 {
		t.Errorf("proxy tunnels %d, want at least 3", n)
	}
}

// TestProxyDeadCoolsAccountDown: of two accounts each behind its own CONNECT proxy, one's proxy
// dies (refused) and one's refuses the credentials (407): both cool down with a reason that
// starts with "proxy" and names the proxy without its password, every generation is served by
// the third account, whose proxy carried each of its upgrades, and the stats say so.
func TestProxyDeadCoolsAccountDown(t *testing.T) {
	sim := newAccountsSim(t, codextest.Options{}, simAccount("good"), simAccount("dead"), simAccount("denied"))
	good := proxytest.NewConnect(t, "good", "pr0xyPW-good")
	dead := proxytest.NewConnect(t, "dead", "pr0xyPW-dead")
	denied := proxytest.NewConnect(t, "denied", "pr0xyPW-denied")
	dead.Kill()
	w := newAccountsWorker(t, sim, worker.Config{NoReuse: true, Accounts: []worker.Account{
		// In this order, the failing accounts are picked first (the order breaks ties).
		{Name: "dead", Token: tokenOf("dead"), ProxyURL: dead.URLWith("dead", "pr0xyPW-dead")},
		{Name: "denied", Token: tokenOf("denied"), ProxyURL: denied.URLWith("denied", "wr0ng-pr0xyPW")},
		{Name: "good", Token: tokenOf("good"), ProxyURL: good.URLWith("good", "pr0xyPW-good")},
	}})
	ctx := testCtx(t)
	for i := range 6 {
		if err := generate(ctx, w, fmt.Sprintf("proxy %d", i), ""); err != nil {
			t.Fatalf("generation %d: %v", i, err)
		}
	}
	stats := map[string]worker.AccountStats{}
	for _, s := range w.AccountStats() {
		stats[s.Name] = s
	}
	for _, name := range []string{"dead", "denied"} {
		s := stats[name]
		if !s.CoolingDown || !strings.HasPrefix(s.Reason, "proxy ") || s.Proxy < 1 || s.Completed != 0 {
			t.Errorf("%s: cooling %v, reason %q, proxy failures %d, completed %d; want cooling, reason proxy …, >= 1, 0",
				name, s.CoolingDown, s.Reason, s.Proxy, s.Completed)
		}
		t.Logf("%s: %q", name, s.Reason)
	}
	if !strings.Contains(stats["denied"].Reason, "407") {
		t.Errorf("denied: reason %q does not name the 407", stats["denied"].Reason)
	}
	if g := stats["good"]; g.Completed != 6 || good.Tunnels.Load() != 6 || sim.Stats().Accounts["good"].UpgradesAccepted != 6 {
		t.Errorf("good: completed %d, tunnels %d, simulator upgrades %d; want 6, 6, 6", g.Completed, good.Tunnels.Load(), sim.Stats().Accounts["good"].UpgradesAccepted)
	}
	out, _ := json.Marshal(w.StatsData())
	for _, pw := range []string{"pr0xyPW-good", "pr0xyPW-dead", "wr0ng-pr0xyPW"} {
		if strings.Contains(string(out), pw) {
			t.Errorf("the stats carry the proxy password %q: %s", pw, out)
		}
	}
	if !strings.Contains(string(out), `"proxy_failures":1`) {
		t.Errorf("stats: no proxy_failures: %s", out)
	}
}
