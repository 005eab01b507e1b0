package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/egress/proxytest"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// originDoor is the simulator's front door for the proxy tests: a TCP relay that counts the
// connections it accepts by their source address. The proxies dial out from addresses of their
// own (127.0.0.2, 127.0.0.3, ...); a connection from 127.0.0.1 went direct.
type originDoor struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	from  map[string]int
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newOriginDoor(t *testing.T, target string) *originDoor {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return newDoorOn(t, l, target)
}

// newDoorOn relays the connections l accepts to target (a listener made in another network
// namespace bridges it to this one).
func newDoorOn(t *testing.T, l net.Listener, target string) *originDoor {
	d := &originDoor{l: l, target: target, from: map[string]int{}, conns: map[net.Conn]struct{}{}}
	d.wg.Add(1)
	go d.serve()
	t.Cleanup(d.close)
	return d
}

func (d *originDoor) serve() {
	defer d.wg.Done()
	for {
		c, err := d.l.Accept()
		if err != nil {
			return
		}
		d.mu.Lock()
		d.from[c.RemoteAddr().(*net.TCPAddr).IP.String()]++
		d.conns[c] = struct{}{}
		d.mu.Unlock()
		d.wg.Add(1)
		go d.relay(c)
	}
}

func (d *originDoor) relay(down net.Conn) {
	defer d.wg.Done()
	defer func() {
		d.mu.Lock()
		delete(d.conns, down)
		d.mu.Unlock()
		down.Close()
	}()
	up, err := net.Dial("tcp", d.target)
	if err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(up, down)
		up.Close()
	}()
	io.Copy(down, up)
	down.Close()
	<-done
}

// counts returns the connections accepted so far by source address.
func (d *originDoor) counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.from))
	for k, v := range d.from {
		out[k] = v
	}
	return out
}

func (d *originDoor) close() {
	d.l.Close()
	d.mu.Lock()
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// expiredAuthFile writes l as an auth.json whose access token expired a minute ago (its refresh
// token is valid): the worker refreshes it as soon as it starts.
func expiredAuthFile(t *testing.T, l codextest.Login) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(p, l.Expired(time.Now()).AuthJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// proxyAccount is one account of TestE2EProxyPerAccount: its proxy's tunnel count and the
// address that proxy dials out from.
type proxyAccount struct {
	name    string
	from    string
	tunnels func() int64
}

// TestE2EProxyPerAccount runs a real worker process with three accounts, each behind its own
// proxy with a password: alice (a Codex CLI login whose access token has expired: a refresh at
// start) through an HTTP CONNECT proxy, bob through a SOCKS5 server (microsocks, socks5h://),
// carol through the pool default CODEXPOOL_PROXY_URL (CONNECT). Every connection reaches the
// simulator through a door that counts them by source address: per account, the tunnels of its
// proxy = its generations + its refreshes (sockets are not reused), and none came direct. Then
// bob's proxy dies: bob cools down with reason proxy (stats and /metrics), alice and carol serve,
// and no client request fails; the gateway's dashboard shows bob's cooldown reason. No proxy
// password appears in any output of the run: the worker's and the gateway's logs, the replies,
// /metrics, the stats, the dashboard's data, and codexpool config.
func TestE2EProxyPerAccount(t *testing.T) {
	proxytest.NeedSOCKS5(t)
	c := newCluster(t, codextest.Options{Words: 3, Latency: 10 * time.Millisecond, Accounts: []codextest.Account{
		{Name: "alice", AccountID: "acct-alice-proxy-0123456789"},
		{Name: "bob", Token: acctToken("bob")},
		{Name: "carol", Token: acctToken("carol")},
	}})
	door := newOriginDoor(t, c.sim.Listener.Addr().String())
	origin := door.l.Addr().String()

	const pwAlice, pwBob, pwCarol = "pw-alice-Xq71", "pw-bob-Zr42", "pw-carol-Wk93"
	alicePx := proxytest.NewConnect(t, "alice", pwAlice)
	alicePx.From = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	bobPx := proxytest.NewSOCKS5(t, "bob", pwBob, "127.0.0.3")
	carolPx := proxytest.NewConnect(t, "carol", pwCarol)
	carolPx.From = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 4)}
	accounts := []proxyAccount{
		{"alice", "127.0.0.2", alicePx.Tunnels.Load},
		{"bob", "127.0.0.3", bobPx.Tunnels.Load},
		{"carol", "127.0.0.4", carolPx.Tunnels.Load},
	}

	login, err := c.sim.Logins.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	file := writeAccounts(t, fmt.Sprintf(`accounts:
  - {name: alice, auth_file: %s, proxy_url: "%s"}
  - {name: bob, token: %s, proxy_url: "%s"}
  - {name: carol, token_env: CAROL_TOKEN}
`, expiredAuthFile(t, login), alicePx.URLWith("alice", pwAlice), acctToken("bob"), bobPx.URL("socks5h", "bob", pwBob)))
	metricsAddr := opsFreeAddr(t)
	env := []string{"CODEXPOOL_ACCOUNTS=" + file, "CAROL_TOKEN=" + acctToken("carol"),
		"CODEXPOOL_PROXY_URL=" + carolPx.URLWith("carol", pwCarol),
		"CODEXPOOL_CODEX_URL=ws://" + origin + codextest.OriginPath, "CODEXPOOL_CODEX_REFRESH_URL=http://" + origin + codextest.RefreshPath,
		"CODEXPOOL_CODEX_TOKEN=", "CODEXPOOL_WS_REUSE=false", "CODEXPOOL_METRICS_ADDR=" + metricsAddr}
	w := c.startWorker("wproxy", env...)
	waitCond(t, 20*time.Second, "alice's expired login refreshed", func() bool { return c.sim.Stats().Accounts["alice"].RefreshOK >= 1 })

	var replies []string
	ok, failed := 0, 0
	generate := func(n int, prefix string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				prompt := fmt.Sprintf("%s %d", prefix, i)
				reply, err := c.client.Generate(ctxT(t, 60*time.Second), request(prompt, nil), nil)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					failed++
					replies = append(replies, err.Error())
					t.Errorf("%s: %v", prompt, err)
				case reply.OutputText != codextest.Answer(prompt, 3):
					failed++
					t.Errorf("%s: answer %q", prompt, reply.OutputText)
				default:
					ok++
					raw, _ := json.Marshal(reply)
					replies = append(replies, string(raw))
				}
			})
			if i%3 == 2 {
				wg.Wait() // three at a time: each burst spreads over the accounts
			}
		}
		wg.Wait()
	}
	generate(12, "proxied")

	st := c.sim.Stats()
	seen := door.counts()
	t.Logf("door connections by source: %v", seen)
	for _, a := range accounts {
		s := st.Accounts[a.name]
		tunnels := waitTunnels(a.tunnels, s.Completed+s.RefreshCalls)
		t.Logf("%s: proxy tunnels %d; generations %d + refreshes %d (upgrades %d, refused %d); door from %s: %d",
			a.name, tunnels, s.Completed, s.RefreshCalls, s.UpgradesAccepted, s.UpgradesRejected, a.from, seen[a.from])
		if tunnels != s.Completed+s.RefreshCalls || int64(seen[a.from]) != tunnels || s.Completed == 0 {
			t.Errorf("%s: proxy tunnels %d, door from its proxy %d; want both = generations %d + refreshes %d, generations > 0",
				a.name, tunnels, seen[a.from], s.Completed, s.RefreshCalls)
		}
	}
	if n := seen["127.0.0.1"]; n != 0 {
		t.Errorf("%d connections reached the simulator direct, want 0", n)
	}

	bobPx.Kill()
	bobBefore := st.Accounts["bob"].Completed
	var m map[string]float64
	for round := 0; ; round++ {
		generate(3, fmt.Sprintf("after bob's proxy died %d", round))
		m = opsScrape(t, "http://"+metricsAddr)
		if m[`codexpool_account_rejections_total{account="bob",reason="proxy"}`] >= 1 {
			break
		}
		if round == 10 {
			t.Fatalf("bob's dead proxy was never tried in 33 generations; metrics: %v", m)
		}
	}
	if got := m[`codexpool_account_cooling_down{account="bob"}`]; got != 1 {
		t.Errorf("codexpool_account_cooling_down{bob} = %v, want 1", got)
	}
	stats := accountStatsOf(t, c, "wproxy")
	bob := stats["bob"]
	if bob.Cooldown == nil || !strings.HasPrefix(bob.Cooldown.Reason, "proxy socks5h://") || bob.Proxy < 1 {
		t.Errorf("bob in the stats: cooldown %+v, proxy failures %d; want a cooldown with reason proxy socks5h://…", bob.Cooldown, bob.Proxy)
	} else {
		t.Logf("bob: cooling down, reason %q", bob.Cooldown.Reason)
	}
	if got := c.sim.Stats().Accounts["bob"].Completed; got != bobBefore {
		t.Errorf("bob completed %d after its proxy died (had %d)", got, bobBefore)
	}
	if n := door.counts()["127.0.0.1"]; n != 0 {
		t.Errorf("%d connections reached the simulator direct, want 0", n)
	}
	t.Logf("client requests: %d ok, %d failed", ok, failed)
	gw, base := c.startGateway()
	dash := dashboardData(t, base)
	if !strings.Contains(dash, `"cooldown_reason":"proxy socks5h://`) {
		t.Errorf("the dashboard's data shows no proxy cooldown for bob: %s", dash)
	}

	// Every output of the run, searched for every proxy password.
	outputs := map[string]string{"worker log": w.out.String(), "replies": strings.Join(replies, "\n"),
		"dashboard data": dash, "gateway log": gw.out.String()}
	outputs["/metrics"] = httpBody(t, "http://"+metricsAddr+"/metrics")
	raw, _ := json.Marshal(stats)
	outputs["stats"] = string(raw)
	cmd := exec.Command(binPath, "config")
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("codexpool config: %v\n%s", err, out)
	}
	outputs["codexpool config"] = string(out)
	if !strings.Contains(string(out), "bob      socks5h://<redacted>@"+bobPx.Addr) {
		t.Errorf("codexpool config does not list bob's proxy redacted:\n%s", out)
	}
	for what, text := range outputs {
		for _, pw := range []string{pwAlice, pwBob, pwCarol} {
			if strings.Contains(text, pw) {
				t.Errorf("%s carries the proxy password %q", what, pw)
			}
		}
	}
}

// waitTunnels waits briefly for a proxy's count to reach want (microsocks logs a tunnel a moment
// after it opened) and returns it.
func waitTunnels(count func() int64, want int64) int64 {
	deadline := time.Now().Add(3 * time.Second)
	for count() < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
	return count()
}

// accountStatsOf returns the per-account stats worker id reports on $SRV.STATS, by name.
func accountStatsOf(t *testing.T, c *cluster, id string) map[string]schemas.AccountStats {
	t.Helper()
	stats, err := client.Stats(ctxT(t, 5*time.Second), c.nc, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stats {
		var s schemas.Stats
		if st.Metadata["worker"] != id || len(st.Endpoints) == 0 || json.Unmarshal(st.Endpoints[0].Data, &s) != nil {
			continue
		}
		out := map[string]schemas.AccountStats{}
		for _, a := range s.Accounts {
			out[a.Name] = a
		}
		return out
	}
	t.Fatalf("no stats from worker %s", id)
	return nil
}

// httpBody returns the body of a GET of url.
func httpBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dashboardData returns the gateway's GET /dashboard/data (what the dashboard's page shows).
func dashboardData(t *testing.T, base string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/dashboard/data", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+gatewayKey)
	var body string
	waitCond(t, 10*time.Second, "the dashboard's data to list the worker's accounts", func() bool {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, `"bob"`)
	})
	return body
}
