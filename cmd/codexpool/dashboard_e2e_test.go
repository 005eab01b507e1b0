package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/worker/codextest"
)

// chromiumEnv names the browser TestE2EDashboard drives; default `chromium` on PATH.
const chromiumEnv = "CODEXPOOL_TEST_CHROMIUM"

// TestE2EDashboard drives GET /dashboard of a gateway process in real headless Chromium, with
// two worker processes sharing two simulator accounts and durable jobs on: the rendered DOM
// shows both account names with their 5 h and weekly windows, both worker ids, a non-zero
// request count, the jobs stream and the charts; the page weighs at most 300 KB; a change (more
// requests) shows within 2 s. It saves a screenshot ($CODEXPOOL_ARTIFACTS or
// /tmp/codexpool-artifacts, dashboard.png). The browser runs only where loopback is all there
// is: outside such a network namespace the test makes one and runs itself in it (root and
// `ip` needed). Without Chromium it skips, except under CI=true, where it fails.
func TestE2EDashboard(t *testing.T) {
	chrome := chromiumBinary(t)
	if ifs := networkInterfaces(t); len(ifs) != 1 || ifs[0] != "lo" {
		runInLoopbackNetns(t, "^TestE2EDashboard$")
		return
	}
	wins := []codextest.Window{{Length: 5 * time.Hour, Budget: 400}, {Length: 7 * 24 * time.Hour, Budget: 2000}}
	c, _, _ := newJobsCluster(t, codextest.Options{Words: 3, Latency: 20 * time.Millisecond, Accounts: []codextest.Account{
		{Name: "alice", Token: acctToken("alice"), Windows: wins}, {Name: "bob", Token: acctToken("bob"), Windows: wins},
	}})
	file := writeAccounts(t, fmt.Sprintf("- {name: alice, token: %s}\n- {name: bob, token: %s}\n", acctToken("alice"), acctToken("bob")))
	for _, id := range []string{"dash-w1", "dash-w2"} {
		c.startWorker(id, append([]string{"CODEXPOOL_ACCOUNTS=" + file}, jobsEnv...)...)
	}
	gw, base := c.startGateway()
	for i := range 6 {
		gatewayAsk(t, base, "dashboard before "+strconv.Itoa(i))
	}

	ctx := browser(t, chrome)
	// The browser sends the key as a client with a key would (a person types it as the Basic
	// password instead: TestDashboardAccess in gateway).
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders,
			network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + gatewayKey}})
		return err
	}), chromedp.Navigate(base+"/dashboard"), chromedp.WaitVisible(chromedp.CSS(`#workers tbody tr[data-worker]`)))
	if err != nil {
		t.Fatalf("load the dashboard: %v", err)
	}
	before := readDashboard(t, ctx, func(d dashboardDOM) bool { return len(d.Workers) == 2 && d.Completed >= 6 && d.Points > 0 })
	t.Logf("rendered: workers %q, accounts %q, windows %q, %d requests, %d completed, %d charts, jobs %q",
		before.Workers, before.Accounts, before.Windows, before.Requests, before.Completed, before.Charts, before.Jobs)
	checkDashboard(t, before)

	// A change: more requests. The page must show them within 2 s of the last one's answer.
	const more = 5
	for i := range more {
		gatewayAsk(t, base, "dashboard after "+strconv.Itoa(i))
	}
	changed := time.Now()
	after := readDashboard(t, ctx, func(d dashboardDOM) bool { return d.Completed >= before.Completed+more })
	lag := time.Since(changed)
	t.Logf("the page showed %d more completed %s after the last request's answer (%d -> %d)", more, lag.Round(time.Millisecond), before.Completed, after.Completed)
	if lag > 2*time.Second {
		t.Errorf("the page showed the change %s after it, want within 2s", lag)
	}
	// A failed request with a client's trace context: the page lists it with its trace id.
	const trace = "3f2c7d8e9a0b1c2d3e4f5a6b7c8d9e0f"
	req, _ := http.NewRequestWithContext(ctxT(t, 30*time.Second), http.MethodPost, base+"/v1/responses", strings.NewReader(`{"input":"x","temperature":"hot"}`))
	req.Header.Set("Authorization", "Bearer "+gatewayKey)
	req.Header.Set("Traceparent", "00-"+trace+"-1a2b3c4d5e6f7a8b-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a request with a bad temperature: %d, want 400", resp.StatusCode)
	}
	failed := readDashboard(t, ctx, func(d dashboardDOM) bool { return slices.Contains(d.FailedTraces, trace) })
	if len(failed.SlowTraces) == 0 {
		t.Errorf("the slow requests table is empty after %d requests", after.Completed)
	}
	saveScreenshot(t, ctx)
	if strings.Contains(gw.out.String(), gatewayKey) {
		t.Error("the gateway logged its key")
	}
}

// dashboardDOM is what TestE2EDashboard reads from the rendered page.
type dashboardDOM struct {
	Workers      []string `json:"workers"`
	Accounts     []string `json:"accounts"`
	Windows      []string `json:"windows"` // the classes of the accounts' window cells
	Requests     int      `json:"requests"`
	Completed    int      `json:"completed"`
	Charts       int      `json:"charts"` // svg.chart elements
	Points       int      `json:"points"` // points of the throughput line
	Jobs         []string `json:"jobs"`   // the jobs table's first row
	HTML         string   `json:"html"`
	PageBytes    int      `json:"page_bytes"` // transferred: the page, its script, style sheet and largest data answer
	DataRequests int      `json:"data_requests"`
	FailedTraces []string `json:"failed_traces"` // the trace ids of the failed requests' table
	SlowTraces   []string `json:"slow_traces"`
}

const readDOM = `(() => {
  const q = (s) => [...document.querySelectorAll(s)];
  const res = performance.getEntriesByType("resource");
  const data = res.filter((r) => r.name.includes("/dashboard/data"));
  const nav = performance.getEntriesByType("navigation")[0];
  return {
    workers: q("#workers tbody tr[data-worker] td:first-child").map((e) => e.textContent),
    accounts: q("#accounts tbody tr[data-account] td:first-child").map((e) => e.textContent),
    windows: q("#accounts .window").map((e) => e.dataset.class),
    requests: +document.getElementById("total-requests").textContent || 0,
    completed: +document.getElementById("total-completed").textContent || 0,
    charts: q("svg.chart").length,
    points: +(document.querySelector("#chart-throughput polyline")?.dataset.points || 0),
    jobs: q("#jobs tbody tr:first-child td").map((e) => e.textContent),
    html: document.documentElement.outerHTML,
    page_bytes: (nav ? nav.transferSize : 0) + res.filter((r) => !r.name.includes("/dashboard/data")).reduce((s, r) => s + r.transferSize, 0)
      + Math.max(0, ...data.map((r) => r.transferSize)),
    data_requests: data.length,
    failed_traces: q("#failed tbody tr[data-request] td.trace").map((e) => e.textContent),
    slow_traces: q("#slow tbody tr[data-request] td.trace").map((e) => e.textContent),
  };
})()`

// readDashboard reads the DOM every 50 ms until ok holds (10 s at most).
func readDashboard(t *testing.T, ctx context.Context, ok func(dashboardDOM) bool) dashboardDOM {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := chromedp.Run(ctx, chromedp.Evaluate[dashboardDOM](readDOM))
		if err != nil {
			t.Fatalf("read the DOM: %v", err)
		}
		if ok(d) {
			return d
		}
		if time.Now().After(deadline) {
			d.HTML = ""
			t.Fatalf("the page did not get there within 10s: %+v", d)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
}

func checkDashboard(t *testing.T, d dashboardDOM) {
	t.Helper()
	if !slices.Equal(d.Workers, []string{"dash-w1", "dash-w2"}) {
		t.Errorf("workers %q, want dash-w1 and dash-w2", d.Workers)
	}
	if !slices.Equal(d.Accounts, []string{"alice", "bob"}) {
		t.Errorf("accounts %q, want alice and bob", d.Accounts)
	}
	if !slices.Contains(d.Windows, "5h") || !slices.Contains(d.Windows, "weekly") {
		t.Errorf("window classes %q, want 5h and weekly", d.Windows)
	}
	if d.Requests <= 0 || d.Completed < 6 {
		t.Errorf("%d requests, %d completed; want at least the 6 made", d.Requests, d.Completed)
	}
	if d.Charts != 3 || d.Points == 0 {
		t.Errorf("%d charts, throughput line of %d points; want 3 charts, a line", d.Charts, d.Points)
	}
	if len(d.Jobs) == 0 || d.Jobs[0] != "CODEXPOOL_JOBS" {
		t.Errorf("jobs row %q, want the stream CODEXPOOL_JOBS", d.Jobs)
	}
	t.Logf("page weight: %d bytes transferred (page, script, style sheet, one data answer; %d data answers so far)", d.PageBytes, d.DataRequests)
	if d.PageBytes <= 0 || d.PageBytes > 300<<10 {
		t.Errorf("page weight %d bytes, want more than 0 and at most 300 KB", d.PageBytes)
	}
	if strings.Contains(d.HTML, gatewayKey) {
		t.Error("the page carries the gateway's key")
	}
}

// gatewayAsk makes one request through the gateway and fails the test unless it succeeds.
func gatewayAsk(t *testing.T, base, prompt string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, 30*time.Second), http.MethodPost, base+"/v1/responses",
		strings.NewReader(string(request(prompt, map[string]any{"model": "gpt-5.1-codex"}))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+gatewayKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/responses: %d", resp.StatusCode)
	}
}

// chromiumBinary finds the browser: $CODEXPOOL_TEST_CHROMIUM, else chromium on PATH. Without
// one the test skips, or fails under CI=true.
func chromiumBinary(t *testing.T) string {
	t.Helper()
	path := os.Getenv(chromiumEnv)
	if path == "" {
		path, _ = exec.LookPath("chromium")
	}
	if path != "" {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium (apt-get install chromium, or set " + chromiumEnv + "): the dashboard's browser test must run in CI")
	}
	t.Skip("no chromium on PATH and " + chromiumEnv + " unset: the dashboard's browser test is skipped (examples/dashboard/ci.sh installs it)")
	return ""
}

// browser starts headless Chromium (killed when the test ends) and returns a tab's context.
func browser(t *testing.T, chrome string) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1300))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser, for as long as ctx
		t.Fatalf("start %s: %v", chrome, err)
	}
	return ctx
}

// saveScreenshot writes the page as dashboard.png under $CODEXPOOL_ARTIFACTS, default
// /tmp/codexpool-artifacts.
func saveScreenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	dir := os.Getenv("CODEXPOOL_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "codexpool-artifacts")
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dashboard.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// runInLoopbackNetns runs this test binary's tests matching run inside a new network namespace
// that has only loopback, and fails unless they pass there. Without root or `ip` it skips, or
// fails under CI=true.
func runInLoopbackNetns(t *testing.T, run string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	ns := fmt.Sprintf("codexpool-r-dashboard-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("cannot make a loopback-only network namespace (ip netns add: %v %s): the browser runs only there", err, out)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if pids, _ := exec.Command("ip", "netns", "pids", ns).Output(); len(pids) > 0 {
			for _, p := range strings.Fields(string(pids)) {
				if pid, err := strconv.Atoi(p); err == nil {
					if proc, err := os.FindProcess(pid); err == nil {
						_ = proc.Kill()
					}
				}
			}
		}
		_ = exec.Command("ip", "netns", "del", ns).Run()
	})
	if out, err := exec.Command("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up in %s: %v %s", ns, err, out)
	}
	args := []string{"netns", "exec", ns, os.Args[0], "-test.run", run, "-test.count=1", "-test.v"}
	cmd := exec.Command("ip", args...)
	// Nothing in there may need the network: the child's TestMain builds codexpool from the cache.
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOTOOLCHAIN=local")
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	t.Logf("in network namespace %s:\n%s", ns, out.String())
	if err != nil {
		t.Fatalf("the test in the loopback-only namespace: %v", err)
	}
	if !strings.Contains(out.String(), "--- PASS: "+strings.Trim(run, "^$")) {
		t.Fatal("the test did not pass in the loopback-only namespace")
	}
}
