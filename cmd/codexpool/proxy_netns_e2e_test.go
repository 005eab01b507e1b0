//go:build linux

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/egress/proxytest"
	"github.com/codexpool/codexpool/worker/codextest"
)

// netnsWorker is what the namespace's thread made: the bridges' listeners (in the namespace) and
// the worker process started in it.
type netnsWorker struct {
	nats, connect, socks net.Listener
	direct               error // dialing the simulator's port from the namespace
	proc                 *proc
}

// TestE2EProxyOnlyRouteInNetns runs the worker process in a network namespace of its own with
// only loopback: the simulator is not there (its port refuses), and the only ways out are three
// bridges the test made inside the namespace: to NATS, to an HTTP CONNECT proxy, to a SOCKS5
// server (microsocks). Two accounts, one behind each proxy, serve every generation: each
// upgrade went through its account's proxy (tunnels = upgrades = generations), nothing else
// could reach the origin. Needs root (CI runs as root: there it fails instead of skipping).
func TestE2EProxyOnlyRouteInNetns(t *testing.T) {
	cannot := t.Skipf
	if os.Getenv("CI") != "" {
		cannot = t.Fatalf
	}
	proxytest.NeedSOCKS5(t)
	c := newCluster(t, codextest.Options{Words: 3, Accounts: []codextest.Account{
		{Name: "alice", Token: acctToken("alice")}, {Name: "bob", Token: acctToken("bob")},
	}})
	const pwAlice, pwBob = "pw-ns-alice-7Hq", "pw-ns-bob-3Kd"
	connect := proxytest.NewConnect(t, "alice", pwAlice)
	socks := proxytest.NewSOCKS5(t, "bob", pwBob, "")
	simAddr := c.sim.Listener.Addr().String()
	file := writeAccounts(t, fmt.Sprintf(`accounts:
  - {name: alice, token: %s, proxy_url: "http://alice:%s@127.0.0.1:%%d"}
  - {name: bob, token: %s, proxy_url: "socks5h://bob:%s@127.0.0.1:%%d"}
`, acctToken("alice"), pwAlice, acctToken("bob"), pwBob))

	made := make(chan netnsWorker, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, alone in the namespace, ends with this goroutine
		if err := enterLoopbackOnlyNetns(); err != nil {
			errc <- err
			return
		}
		var nw netnsWorker
		var err error
		listen := func() net.Listener {
			l, lerr := net.Listen("tcp", "127.0.0.1:0")
			err = errors.Join(err, lerr)
			return l
		}
		nw.nats, nw.connect, nw.socks = listen(), listen(), listen()
		if err != nil {
			errc <- err
			return
		}
		if conn, derr := net.DialTimeout("tcp", simAddr, time.Second); derr == nil {
			conn.Close()
		} else {
			nw.direct = derr
		}
		port := func(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }
		data, rerr := os.ReadFile(file)
		if rerr == nil {
			rerr = os.WriteFile(file, fmt.Appendf(nil, string(data), port(nw.connect), port(nw.socks)), 0o600)
		}
		if rerr != nil {
			errc <- rerr
			return
		}
		nw.proc = c.startWorkerNoWait("wnetns", "CODEXPOOL_NATS_URL=nats://"+nw.nats.Addr().String(),
			"CODEXPOOL_ACCOUNTS="+file, "CODEXPOOL_CODEX_TOKEN=", "CODEXPOOL_WS_REUSE=false")
		made <- nw
	}()
	var nw netnsWorker
	select {
	case err := <-errc:
		cannot("needs a network namespace of its own (root; CI runs it): %v", err)
	case nw = <-made:
	}
	if nw.direct == nil || !errors.Is(nw.direct, syscall.ECONNREFUSED) {
		t.Fatalf("from the namespace, the simulator's %s: %v; want connection refused", simAddr, nw.direct)
	}
	newDoorOn(t, nw.nats, strings.TrimPrefix(c.url, "nats://"))
	newDoorOn(t, nw.connect, strings.TrimPrefix(connect.URL, "http://"))
	newDoorOn(t, nw.socks, socks.Addr)
	deadline := time.Now().Add(60 * time.Second)
	for countWorkers(c.nc, "codex.generate", "wnetns") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("worker in the namespace not serving after 60s\n%s", nw.proc.out.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}

	const n = 12
	for burst := range n / 4 {
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := range 4 { // four at once: the burst spreads over both accounts
			wg.Go(func() {
				prompt := fmt.Sprintf("netns %d.%d", burst, i)
				reply, err := c.client.Generate(ctxT(t, 60*time.Second), request(prompt, nil), nil)
				if err == nil && reply.OutputText != codextest.Answer(prompt, 3) {
					err = fmt.Errorf("answer %q", reply.OutputText)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", prompt, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	st := c.sim.Stats()
	a, b := st.Accounts["alice"], st.Accounts["bob"]
	ct, sk := connect.Tunnels.Load(), waitTunnels(socks.Tunnels.Load, b.UpgradesAccepted)
	t.Logf("%d generations from the namespace: alice %d (CONNECT tunnels %d, upgrades %d), bob %d (SOCKS5 tunnels %d, upgrades %d)",
		n, a.Completed, ct, a.UpgradesAccepted, b.Completed, sk, b.UpgradesAccepted)
	if a.Completed == 0 || b.Completed == 0 || a.Completed+b.Completed != n || ct != a.UpgradesAccepted || sk != b.UpgradesAccepted || a.UpgradesAccepted != a.Completed || b.UpgradesAccepted != b.Completed {
		t.Errorf("alice: completed %d, tunnels %d, upgrades %d; bob: completed %d, tunnels %d, upgrades %d; want tunnels = upgrades = completed, %d in all",
			a.Completed, ct, a.UpgradesAccepted, b.Completed, sk, b.UpgradesAccepted, n)
	}
	for _, pw := range []string{pwAlice, pwBob} {
		if strings.Contains(nw.proc.out.String(), pw) {
			t.Errorf("the worker's log carries the proxy password %q", pw)
		}
	}
}
