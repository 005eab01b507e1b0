package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// opsFreeAddr returns a loopback address nothing listens on right now.
func opsFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// opsScrape reads /metrics into series (with labels) -> value.
func opsScrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

func opsStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestE2EMetrics runs the real binary with CODEXPOOL_METRICS_ADDR: the counters move with real
// requests, and /readyz answers 503 once SIGTERM has started the shutdown.
func TestE2EMetrics(t *testing.T) {
	c := newCluster(t, codextest.Options{Latency: 20 * time.Millisecond})
	addr := opsFreeAddr(t)
	p := c.startWorker("w-metrics", "CODEXPOOL_METRICS_ADDR="+addr, "CODEXPOOL_SHUTDOWN_GRACE=30s")
	base := "http://" + addr
	if got := opsStatus(t, base+"/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz = %d, want 200 while serving", got)
	}
	if got := opsStatus(t, base+"/healthz"); got != http.StatusOK {
		t.Fatalf("/healthz = %d, want 200", got)
	}
	before := opsScrape(t, base)
	ctx := ctxT(t, 30*time.Second)
	const n = 4
	for i := range n {
		if _, err := c.client.Generate(ctx, request("hello "+strconv.Itoa(i), nil), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.client.Stream(ctx, request("stream", nil), nil, func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	after := opsScrape(t, base)
	for name, want := range map[string]float64{
		`codexpool_requests_total{code="ok"}`:                       n + 1,
		`codexpool_generation_duration_seconds_count{outcome="ok"}`: n + 1,
		`codexpool_first_event_seconds_count`:                       n + 1,
	} {
		if got := after[name] - before[name]; got != want {
			t.Errorf("%s moved by %v, want %v", name, got, want)
		}
	}
	if after[`codexpool_upstream_upgrades_total{result="ok"}`] < 1 || after[`codexpool_upstream_sockets_reused_total`] < 1 {
		t.Errorf("upstream series did not move: upgrades %v, reused %v",
			after[`codexpool_upstream_upgrades_total{result="ok"}`], after[`codexpool_upstream_sockets_reused_total`])
	}

	// A stalled generation keeps the worker in its shutdown grace while /readyz is checked.
	stalled := request("stall", map[string]any{"metadata": map[string]string{"sim_fault": "stall"}})
	done := make(chan error, 1)
	go func() {
		_, err := c.client.Generate(ctx, stalled, nats.Header{schemas.HeaderTimeout: {"20s"}})
		done <- err
	}()
	waitCond(t, 10*time.Second, "the stalled generation in flight", func() bool {
		return opsScrape(t, base)[`codexpool_inflight`] == 1
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitCond(t, 10*time.Second, "/readyz to answer 503 during shutdown", func() bool {
		return opsStatus(t, base+"/readyz") == http.StatusServiceUnavailable
	})
	select {
	case <-p.done:
		t.Fatal("the worker exited before /readyz was seen at 503 during its grace")
	default:
	}
	c.sim.CloseClientConnections() // end the stall: the generation fails and the worker can exit
	p.waitExit(t, 30*time.Second)
	if p.err != nil {
		t.Errorf("worker exit: %v, want 0", p.err)
	}
	<-done
}

// TestE2ESecureNATSPermissions runs a worker and a client as NATS users with exactly the
// permissions docs/security.md documents: one-shot, streaming, micro discovery and the hand-back of a
// full worker work without a single permission violation; a wrong password is refused clearly.
func TestE2ESecureNATSPermissions(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true}
	opts.Users = []*server.User{
		{Username: "worker", Password: "worker-pw", Permissions: &server.Permissions{
			// $JS.API.INFO: the worker asks whether the server has JetStream (for shared session
			// bindings); this one has none, so each worker keeps its own.
			Publish:   &server.SubjectPermission{Allow: []string{"codex.generate", "_INBOX.>", "codexpool.gate.>", "$JS.API.INFO"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"codex.generate", "codex.generate.worker.>", "codex.cancel", "_INBOX.>", "$SRV.>", "codexpool.gate.>"}},
		}},
		{Username: "client", Password: "client-pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"codex.generate", "codex.cancel", "$SRV.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
		}},
	}
	ns := testutil.StartServer(t, opts)
	sim := codextest.NewServer(codextest.Options{Token: simToken, Latency: 300 * time.Millisecond})
	t.Cleanup(sim.Close)

	var violations sync.Mutex
	var clientErrs []string
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("client", "client-pw"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			violations.Lock()
			clientErrs = append(clientErrs, err.Error())
			violations.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := &cluster{t: t, url: ns.ClientURL(), nc: nc, sim: sim, client: client.New(nc, client.Options{RetryBusy: -1})}
	p := c.startWorker("w-secure", "CODEXPOOL_NATS_USER=worker", "CODEXPOOL_NATS_PASSWORD=worker-pw", "CODEXPOOL_MAX_INFLIGHT=1")

	ctx := ctxT(t, 30*time.Second)
	if _, err := c.client.Generate(ctx, request("hello", nil), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.Stream(ctx, request("stream", nil), nil, func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// Two at once on a worker that takes one: the second is handed back (a publish on
	// codex.generate) until the hop limit answers worker_busy.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.client.Generate(ctx, request("pair", nil), nil) })
	}
	wg.Wait()
	for _, err := range errs {
		if e, ok := schemas.AsError(err); err != nil && (!ok || e.Code != schemas.CodeWorkerBusy) {
			t.Errorf("concurrent request: %v, want success or worker_busy", err)
		}
	}
	if got := countWorkers(nc, "codex.generate", "w-secure"); got != 1 {
		t.Errorf("micro discovery as the client user found %d workers, want 1", got)
	}
	p.stop(t, 30*time.Second)
	if out := p.out.String(); strings.Contains(strings.ToLower(out), "permissions violation") {
		t.Errorf("the worker hit a permission violation with the documented permissions:\n%s", out)
	}
	if out := p.out.String(); strings.Contains(out, "worker-pw") {
		t.Errorf("the worker logged its NATS password:\n%s", out)
	}
	violations.Lock()
	if len(clientErrs) > 0 {
		t.Errorf("client errors: %v", clientErrs)
	}
	violations.Unlock()

	// Wrong password: the worker exits at once with a clear error naming NATS authorization.
	bad := c.startWorkerNoWait("w-bad", "CODEXPOOL_NATS_USER=worker", "CODEXPOOL_NATS_PASSWORD=nope")
	bad.waitExit(t, 20*time.Second)
	if bad.err == nil || !strings.Contains(bad.out.String(), "Authorization Violation") || strings.Contains(bad.out.String(), "nope") {
		t.Errorf("wrong password: exit %v, output:\n%s", bad.err, bad.out.String())
	}
}
