package metrics_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/metrics"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitTimeout = 20 * time.Second

// pool is one worker wired as `codexpool worker` wires it, with metrics on a free port.
type pool struct {
	svc    *queue.Service
	client *client.Client
	base   string // http://host:port of the metrics server
}

func newPool(t *testing.T) *pool {
	t.Helper()
	sim := codextest.NewServer(codextest.Options{Token: "tok", Latency: 20 * time.Millisecond})
	t.Cleanup(sim.Close)
	return newPoolFor(t, sim, worker.Config{Token: "tok"})
}

// newPoolFor is newPool with the worker's credentials in cfg, against sim.
func newPoolFor(t *testing.T, sim *codextest.Server, cfg worker.Config) *pool {
	t.Helper()
	ns, err := embedded.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })

	cfg.ID, cfg.URL, cfg.MaxIdleSockets = "w-metrics", sim.URL, 256
	m := metrics.New(cfg.ID, "test")
	w, err := worker.New(cfg, worker.Options{Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })

	ms, err := metrics.Start("127.0.0.1:0", m, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ms.Shutdown(context.Background()) })
	p := &pool{base: "http://" + ms.Addr()}
	if code, _ := p.get(t, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("readyz before NATS = %d, want 503", code)
	}
	if code, _ := p.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("healthz = %d, want 200", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	nc, err := queue.Connect(ctx, ns.ClientURL(), "metrics test worker", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	svc, err := queue.NewService(nc, queue.Config{WorkerID: cfg.ID, WorkerStats: w.StatsData}, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	m.SetSources(metrics.Sources{
		Service: svc.Stats, Upstream: w.UpstreamStats, Gate: w.GateSnapshot, Accounts: w.AccountStats, NATS: nc,
		Ready: func() bool { return nc.IsConnected() && !svc.Stats().Draining },
	})
	p.svc = svc

	cnc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnc.Close)
	p.client = client.New(cnc, client.Options{RetryBusy: -1, Timeout: waitTimeout})
	return p
}

func (p *pool) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(p.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape returns every sample of /metrics by its series name with labels, as written.
func (p *pool) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	code, body := p.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d\n%s", code, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

func TestMetricsMoveWithRequests(t *testing.T) {
	p := newPool(t)
	before := p.scrape(t)
	for _, name := range []string{
		`codexpool_requests_total{code="ok"}`, `codexpool_inflight`, `codexpool_gate_spacing_seconds`,
		`codexpool_upstream_dials_total`, `codexpool_nats_reconnects_total`, `codexpool_nats_connected`,
		`codexpool_ready`, `codexpool_worker_info{version="test",worker="w-metrics"}`, `go_goroutines`,
	} {
		if _, ok := before[name]; !ok {
			t.Errorf("first scrape has no %s", name)
		}
	}
	if before[`codexpool_ready`] != 1 || before[`codexpool_nats_connected`] != 1 {
		t.Errorf("ready = %v, nats_connected = %v, want 1 and 1", before[`codexpool_ready`], before[`codexpool_nats_connected`])
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	const n = 5
	for i := range n {
		if _, err := p.client.Generate(ctx, []byte(`{"input":"hello `+strconv.Itoa(i)+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.client.Stream(ctx, []byte(`{"input":"stream me","stream":true}`), nil, func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// One refusal and one upstream failure, counted by their codes.
	if _, err := p.client.Generate(ctx, []byte(`{"input":""}`), nil); err == nil {
		t.Fatal("empty input accepted")
	}
	failing, _ := json.Marshal(map[string]any{"input": "x", "metadata": map[string]string{"sim_fault": "failed"}})
	if _, err := p.client.Generate(ctx, failing, nil); err == nil {
		t.Fatal("sim_fault=failed succeeded")
	}

	after := p.scrape(t)
	moved := func(name string, want float64) {
		t.Helper()
		if got := after[name] - before[name]; got != want {
			t.Errorf("%s moved by %v, want %v (before %v, after %v)", name, got, want, before[name], after[name])
		}
	}
	moved(`codexpool_requests_total{code="ok"}`, n+1)
	moved(`codexpool_requests_total{code="invalid_request"}`, 1)
	moved(`codexpool_requests_total{code="upstream_error"}`, 1)
	moved(`codexpool_generation_duration_seconds_count{outcome="ok"}`, n+1)
	moved(`codexpool_generation_duration_seconds_count{outcome="error"}`, 1)
	moved(`codexpool_first_event_seconds_count`, n+2)
	moved(`codexpool_requests_received_total`, n+3)
	if after[`codexpool_upstream_dials_total`] < 1 || after[`codexpool_upstream_upgrades_total{result="ok"}`] < 1 {
		t.Errorf("no upgrade counted: dials %v, upgrades %v", after[`codexpool_upstream_dials_total`], after[`codexpool_upstream_upgrades_total{result="ok"}`])
	}
	if after[`codexpool_upstream_sockets_reused_total`] < n-1 {
		t.Errorf("sockets reused = %v, want >= %d (sequential requests share a socket)", after[`codexpool_upstream_sockets_reused_total`], n-1)
	}
	if got := after[`codexpool_gate_wait_seconds_count`] - before[`codexpool_gate_wait_seconds_count`]; got < 1 {
		t.Errorf("gate wait histogram moved by %v, want an observation for the generation that dialed", got)
	}
}

func TestReadyzDuringShutdown(t *testing.T) {
	p := newPool(t)
	if code, _ := p.get(t, "/readyz"); code != http.StatusOK {
		t.Fatalf("readyz = %d, want 200 once subscribed", code)
	}
	// A stalled generation keeps Shutdown waiting for its grace.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	stalled, _ := json.Marshal(map[string]any{"input": "x", "metadata": map[string]string{"sim_fault": "stall"}})
	reqDone := make(chan error, 1)
	go func() {
		_, err := p.client.Generate(ctx, stalled, nil)
		reqDone <- err
	}()
	waitFor(t, "the stalled generation to start", func() bool { return p.svc.Stats().Inflight == 1 })

	grace, endGrace := context.WithCancel(context.Background())
	shutDone := make(chan error, 1)
	go func() { shutDone <- p.svc.Shutdown(grace) }()
	waitFor(t, "readyz to answer 503", func() bool {
		code, _ := p.get(t, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	select {
	case err := <-shutDone:
		t.Fatalf("Shutdown returned (%v) before its grace ended; readyz was not checked during it", err)
	default:
	}
	if code, _ := p.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("healthz during shutdown = %d, want 200 (the process is up)", code)
	}
	if got := p.scrape(t)[`codexpool_draining`]; got != 1 {
		t.Errorf("codexpool_draining = %v, want 1", got)
	}
	endGrace()
	<-shutDone
	if err := <-reqDone; err == nil {
		t.Error("the stalled request succeeded; want 503 unavailable")
	}
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, waitTimeout, what, cond)
}

// TestAccountSeries runs a worker with two accounts, the first exhausted: the request moves to
// the second, and the per-account series say so; the series without an account label sum over
// both.
func TestAccountSeries(t *testing.T) {
	hour := codextest.Window{Length: time.Hour, Budget: 100}
	sim := codextest.NewServer(codextest.Options{Accounts: []codextest.Account{
		{Name: "team-a", Token: "tok-a-0123456789", Windows: []codextest.Window{hour}},
		{Name: "team-b", Token: "tok-b-0123456789", Windows: []codextest.Window{hour}},
	}})
	t.Cleanup(sim.Close)
	if err := sim.Accounts.SetUsage("team-a", 0, 100); err != nil {
		t.Fatal(err)
	}
	if err := sim.Accounts.SetUsage("team-b", 0, 42); err != nil {
		t.Fatal(err)
	}
	p := newPoolFor(t, sim, worker.Config{Accounts: []worker.Account{
		{Name: "team-a", Token: "tok-a-0123456789"}, {Name: "team-b", Token: "tok-b-0123456789"},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for i := range 3 {
		if _, err := p.client.Generate(ctx, []byte(`{"input":"hello `+strconv.Itoa(i)+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	got := p.scrape(t)
	want := map[string]float64{
		`codexpool_account_cooling_down{account="team-a"}`:                                   1,
		`codexpool_account_cooling_down{account="team-b"}`:                                   0,
		`codexpool_account_rejections_total{account="team-a",reason="limits"}`:               1,
		`codexpool_account_rejections_total{account="team-b",reason="limits"}`:               0,
		`codexpool_account_moved_total{account="team-a"}`:                                    1,
		`codexpool_account_requests_total{account="team-a"}`:                                 1,
		`codexpool_account_requests_total{account="team-b"}`:                                 3,
		`codexpool_account_completed_total{account="team-b"}`:                                3,
		`codexpool_account_upgrades_total{account="team-a",result="ok"}`:                     1,
		`codexpool_account_upgrades_total{account="team-b",result="ok"}`:                     1,
		`codexpool_account_used_percent{account="team-a",limit="codex",window_minutes="60"}`: 100,
		`codexpool_account_used_percent{account="team-b",limit="codex",window_minutes="60"}`: 44,
		`codexpool_upstream_upgrades_total{result="ok"}`:                                     2,
		`codexpool_requests_total{code="ok"}`:                                                3,
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, v)
		}
	}
	if left := got[`codexpool_account_cooldown_seconds{account="team-a"}`]; left < 50*60 || left > 3602 {
		t.Errorf("team-a cooldown seconds = %v, want about an hour (its window's reset)", left)
	}
	var lines []string
	for name, v := range got {
		if strings.HasPrefix(name, "codexpool_account_") {
			lines = append(lines, name+" "+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	slices.Sort(lines)
	t.Logf("per-account series:\n%s", strings.Join(lines, "\n"))
}
