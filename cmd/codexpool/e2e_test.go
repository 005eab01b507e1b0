package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// The end-to-end tests build the real binary once and run worker processes against a real NATS
// server (nats-server/v2, in this test process) and the origin simulator over loopback.

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "codexpool-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "codexpool")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build codexpool: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const simToken = "e2e-secret-token-123"

type cluster struct {
	t      *testing.T
	url    string
	nc     *nats.Conn
	sim    *codextest.Server
	client *client.Client
}

func newCluster(t *testing.T, simOpts codextest.Options, opts ...embedded.Option) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	ns, err := embedded.Start("127.0.0.1:0", nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	simOpts.Token = simToken
	sim := codextest.NewServer(simOpts)
	t.Cleanup(sim.Close)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &cluster{t: t, url: ns.ClientURL(), nc: nc, sim: sim,
		client: client.New(nc, client.Options{RetryBusy: -1})}
}

// newJetStreamCluster is newCluster on a JetStream server (file store in a temporary folder).
func newJetStreamCluster(t *testing.T, simOpts codextest.Options) *cluster {
	t.Helper()
	return newCluster(t, simOpts, embedded.WithJetStream(t.TempDir()))
}

type proc struct {
	id   string
	cmd  *exec.Cmd
	out  *testutil.SyncBuffer
	done chan struct{}
	err  error
}

// startWorker starts a worker process and waits until it serves the subject.
func (c *cluster) startWorker(id string, env ...string) *proc {
	c.t.Helper()
	p := c.startWorkerNoWait(id, env...)
	deadline := time.Now().Add(60 * time.Second)
	for countWorkers(c.nc, "codex.generate", id) == 0 {
		select {
		case <-p.done:
			c.t.Fatalf("worker %s exited before serving: %v\n%s", id, p.err, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("worker %s not serving after 60s\n%s", id, p.out.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	return p
}

// startWorkerNoWait starts a worker process (killed when the test ends; its output is logged if
// the test failed) and returns at once.
func (c *cluster) startWorkerNoWait(id string, env ...string) *proc {
	c.t.Helper()
	return c.startProcess(id, []string{"worker"}, append([]string{
		"CODEXPOOL_CODEX_URL=" + c.sim.URL,
		"CODEXPOOL_CODEX_TOKEN=" + simToken,
		"CODEXPOOL_WORKER_ID=" + id,
		"CODEXPOOL_FORBIDDEN_COOLDOWN_MS=50",
	}, env...)...)
}

// startProcess runs the binary with args against the cluster's NATS (HOME a temporary folder,
// debug JSON logs; env is added last, so it wins). The process is killed when the test ends and
// its output logged if the test failed.
func (c *cluster) startProcess(id string, args []string, env ...string) *proc {
	c.t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append([]string{
		"HOME=" + c.t.TempDir(),
		"PATH=" + os.Getenv("PATH"),
		"CODEXPOOL_NATS_URL=" + c.url,
		"CODEXPOOL_LOG_LEVEL=debug",
		"CODEXPOOL_LOG_FORMAT=json",
	}, env...)
	p := &proc{id: id, cmd: cmd, out: &testutil.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	c.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if c.t.Failed() {
			c.t.Logf("%s output:\n%s", id, p.out.String())
		}
	})
	return p
}

// countWorkers counts micro services serving subject whose metadata names worker id.
func countWorkers(nc *nats.Conn, subject, id string) int {
	infos, _ := client.Infos(context.Background(), nc, 100*time.Millisecond)
	n := 0
	for _, info := range infos {
		if info.Metadata["worker"] != id {
			continue
		}
		for _, ep := range info.Endpoints {
			if ep.Subject == subject {
				n++
			}
		}
	}
	return n
}

// stop sends SIGTERM and waits for the exit; it fails the test unless the exit status is 0.
func (p *proc) stop(t *testing.T, within time.Duration) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.waitExit(t, within)
	if p.err != nil {
		t.Fatalf("worker %s exit: %v\n%s", p.id, p.err, p.out.String())
	}
}

// waitExit waits for the process to exit, failing the test when it has not within.
func (p *proc) waitExit(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("worker %s did not exit within %s", p.id, within)
	}
}

func request(input string, extra map[string]any) []byte {
	m := map[string]any{"input": input}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestE2EOneShot(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 6})
	c.startWorker("w1")
	hdr := nats.Header{}
	hdr.Set(schemas.HeaderRequestID, "req-42")
	reply, err := c.client.Generate(ctxT(t, 30*time.Second), request("Say hello", nil), hdr)
	if err != nil {
		t.Fatal(err)
	}
	if want := codextest.Answer("Say hello", 6); reply.OutputText != want {
		t.Fatalf("output_text = %q, want %q", reply.OutputText, want)
	}
	if reply.RequestID != "req-42" || reply.Worker != "w1" {
		t.Fatalf("headers: request id %q worker %q, want req-42, w1", reply.RequestID, reply.Worker)
	}
	var resp struct {
		Status string `json:"status"`
		Usage  struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(reply.Response, &resp); err != nil || resp.Status != "completed" || resp.Usage.TotalTokens == 0 {
		t.Fatalf("response = %s (err %v), want a completed response with usage", reply.Response, err)
	}
	// nats micro stats show the true figures, the gate and the pool as the endpoint's data.
	st, ok := workerStatsOf(c.nc, "w1")
	if !ok || st.Completed != 1 || st.Gate.Mode != "adaptive" || st.Gate.Starts != 1 || st.Gate.Window < 1 || st.Upstream.Idle != 1 {
		t.Fatalf("worker stats = %+v (found %v), want 1 completed, an adaptive gate with 1 start, 1 idle socket", st, ok)
	}
	// The worker sent what the official client sends upstream.
	h := c.sim.LastUpgradeHeader()
	if h.Get("Authorization") != "Bearer "+simToken || h.Get("OpenAI-Beta") == "" {
		t.Fatalf("upgrade headers: %v", h)
	}
}

func TestE2EStreaming(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 5, Latency: 50 * time.Millisecond})
	c.startWorker("w1")
	inbox := nats.NewInbox()
	ch := make(chan *nats.Msg, 100)
	sub, err := c.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishMsg(&nats.Msg{Subject: "codex.generate", Reply: inbox, Data: request("stream me", map[string]any{"stream": true})}); err != nil {
		t.Fatal(err)
	}
	var types []string
	var text strings.Builder
	timeout := time.After(30 * time.Second)
	for seq := 1; ; seq++ {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-timeout:
			t.Fatalf("stream did not end; got %v", types)
		}
		if len(m.Data) == 0 {
			if m.Header.Get(schemas.HeaderSeq) != "" {
				t.Fatalf("sentinel carries Codex-Seq %q", m.Header.Get(schemas.HeaderSeq))
			}
			break
		}
		if got := m.Header.Get(schemas.HeaderSeq); got != strconv.Itoa(seq) {
			t.Fatalf("message %d has Codex-Seq %q", seq, got)
		}
		var ev struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("event %d is not JSON: %q", seq, m.Data)
		}
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if len(types) < 3 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Fatalf("event types = %v, want response.created first and response.completed last", types)
	}
	if want := codextest.Answer("stream me", 5); text.String() != want {
		t.Fatalf("streamed text = %q, want %q", text.String(), want)
	}
	select {
	case m := <-ch:
		t.Fatalf("message after the sentinel: %q", m.Data)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestE2EErrors provokes every error code of the contract that the simulator can cause, through
// the real worker, and checks the worker keeps serving afterwards.
func TestE2EErrors(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 3})
	c.startWorker("w1", "CODEXPOOL_MAX_REQUEST_BYTES=4096", "CODEXPOOL_CONNECT_TIMEOUT=2s")
	type tc struct {
		name    string
		setup   func()
		payload []byte
		hdr     nats.Header
		status  int
		code    schemas.Code
		after   func()
	}
	tests := []tc{
		{name: "not JSON", payload: []byte("{nope"), status: 400, code: schemas.CodeInvalidRequest},
		{name: "missing input", payload: []byte(`{"model":"x"}`), status: 400, code: schemas.CodeInvalidRequest},
		{name: "previous_response_id", payload: request("hi", map[string]any{"previous_response_id": "resp_1"}), status: 400, code: schemas.CodeInvalidRequest},
		{name: "bad Codex-Timeout", payload: request("hi", nil), hdr: nats.Header{schemas.HeaderTimeout: []string{"soon"}}, status: 400, code: schemas.CodeInvalidRequest},
		{name: "too large", payload: request(strings.Repeat("x", 5000), nil), status: 413, code: schemas.CodeRequestTooLarge},
		{name: "401", setup: func() { c.sim.CloseClientConnections(); c.sim.Faults.Reject(1, 401, 0) }, payload: request("hi", nil), status: 401, code: schemas.CodeUpstreamUnauthorized},
		// The adaptive gate retries a 403 until the request's deadline, then returns the last 403.
		{name: "403 until the deadline", setup: func() { c.sim.CloseClientConnections(); c.sim.Faults.Reject(1000, 403, 0) }, after: func() { c.sim.Faults.Clear(); c.sim.ResetStats() },
			payload: request("hi", nil), hdr: nats.Header{schemas.HeaderTimeout: []string{"2s"}}, status: 403, code: schemas.CodeOriginForbidden},
		{name: "429 upgrade", setup: func() { c.sim.CloseClientConnections(); c.sim.Faults.Reject(1, 429, 2*time.Second) }, payload: request("hi", nil), status: 429, code: schemas.CodeUpstreamRateLimited},
		{name: "429 event", payload: request("hi", map[string]any{"metadata": map[string]string{"sim_fault": "error:429"}}), status: 429, code: schemas.CodeUpstreamRateLimited},
		{name: "response.failed", payload: request("hi", map[string]any{"metadata": map[string]string{"sim_fault": "failed"}}), status: 502, code: schemas.CodeUpstreamError},
		{name: "drop mid-stream", payload: request("hi", map[string]any{"metadata": map[string]string{"sim_fault": "drop"}}), status: 502, code: schemas.CodeUpstreamError},
		{name: "deadline", payload: request("hi", map[string]any{"metadata": map[string]string{"sim_latency_ms": "5000"}}), hdr: nats.Header{schemas.HeaderTimeout: []string{"300ms"}}, status: 504, code: schemas.CodeUpstreamTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			start := time.Now()
			_, err := c.client.Generate(ctxT(t, 30*time.Second), tt.payload, tt.hdr)
			if tt.after != nil {
				tt.after()
			}
			se, ok := schemas.AsError(err)
			if !ok {
				t.Fatalf("err = %v, want a %d %s error", err, tt.status, tt.code)
			}
			if se.Status != tt.status || se.Code != tt.code {
				t.Fatalf("got %d %s (%s), want %d %s", se.Status, se.Code, se.Message, tt.status, tt.code)
			}
			if strings.Contains(se.Message, simToken) {
				t.Fatalf("error message leaks the token: %q", se.Message)
			}
			if tt.status == 400 || tt.status == 413 {
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("refusal took %s", d)
				}
			}
			if tt.name == "429 upgrade" && se.RetryAfter < time.Second {
				t.Errorf("retry after = %s, want the origin's 2s", se.RetryAfter)
			}
			// The worker keeps serving.
			reply, err := c.client.Generate(ctxT(t, 30*time.Second), request("still there?", nil), nil)
			if err != nil || reply.OutputText != codextest.Answer("still there?", 3) {
				t.Fatalf("after %s: reply %+v, err %v", tt.name, reply, err)
			}
		})
	}
	// A request nobody can answer is counted and never reaches the origin.
	before := c.sim.Stats().Responses
	if err := c.nc.Publish("codex.generate", request("no reply subject", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.Generate(ctxT(t, 30*time.Second), request("after", nil), nil); err != nil {
		t.Fatal(err)
	}
	if got := c.sim.Stats().Responses - before; got != 1 {
		t.Fatalf("origin saw %d responses, want 1 (the request without a reply subject must not be forwarded)", got)
	}
}

func TestE2EWorkerBusyAndUnavailable(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 3})
	w := c.startWorker("w1", "CODEXPOOL_MAX_INFLIGHT=1", "CODEXPOOL_SHUTDOWN_GRACE=200ms")
	slow := request("slow", map[string]any{"metadata": map[string]string{"sim_latency_ms": "20000"}})
	slowErr := make(chan error, 1)
	go func() {
		_, err := c.client.Generate(context.Background(), slow, nil)
		slowErr <- err
	}()
	if err := c.sim.WaitOpenSockets(ctxT(t, 10*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	// Wait until the slow one is really in flight (the origin got it).
	for deadline := time.Now().Add(10 * time.Second); c.sim.Stats().Responses < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never reached the origin")
		}
	}
	start := time.Now()
	_, err := c.client.Generate(ctxT(t, 10*time.Second), request("no room", nil), nil)
	if se, ok := schemas.AsError(err); !ok || se.Code != schemas.CodeWorkerBusy || se.Status != 429 {
		t.Fatalf("full worker: err = %v, want 429 worker_busy", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("worker_busy took %s, want it fast", d)
	}
	// SIGTERM: the in-flight request cannot finish within the 200ms grace: 503.
	w.stop(t, 20*time.Second)
	select {
	case err := <-slowErr:
		if se, ok := schemas.AsError(err); !ok || se.Code != schemas.CodeUnavailable || se.Status != 503 {
			t.Fatalf("in-flight at shutdown: err = %v, want 503 unavailable", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the in-flight request was never answered")
	}
	// With no worker left, clients get NATS's no-responders at once.
	_, err = c.client.Generate(ctxT(t, 10*time.Second), request("anyone?", nil), nil)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("no workers: err = %v, want no responders", err)
	}
}

func TestE2ETwoWorkersShareLoad(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 4, Latency: 100 * time.Millisecond})
	c.startWorker("w1")
	c.startWorker("w2")
	var mu sync.Mutex
	served := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("share %d", i)
			reply, err := c.client.Generate(ctxT(t, 60*time.Second), request(p, nil), nil)
			if err != nil {
				errs <- err
				return
			}
			if reply.OutputText != codextest.Answer(p, 4) {
				errs <- fmt.Errorf("wrong answer for %q: %q", p, reply.OutputText)
				return
			}
			mu.Lock()
			served[reply.Worker]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if served["w1"] == 0 || served["w2"] == 0 {
		t.Fatalf("served = %v, want both workers to serve", served)
	}
}

// TestE2ESigtermDuringBurst: a worker told to stop in the middle of a burst loses nothing —
// every request is answered successfully, by it (draining) or by the others — and exits 0.
func TestE2ESigtermDuringBurst(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 4, Latency: 300 * time.Millisecond})
	victim := c.startWorker("w1", "CODEXPOOL_SHUTDOWN_GRACE=20s")
	c.startWorker("w2")
	c.startWorker("w3")
	const n = 90
	cl := client.New(c.nc, client.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("burst %d", i)
			reply, err := cl.Generate(ctxT(t, 60*time.Second), request(p, nil), nil)
			if err == nil && reply.OutputText != codextest.Answer(p, 4) {
				err = fmt.Errorf("wrong answer %q", reply.OutputText)
			}
			if err != nil {
				errs <- fmt.Errorf("request %d: %w", i, err)
			}
		}()
		if i == n/3 {
			_ = victim.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	victim.waitExit(t, 30*time.Second)
	if victim.err != nil {
		t.Fatalf("victim exit: %v", victim.err)
	}
}

func TestE2EAskCommand(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 5})
	c.startWorker("w1")
	for _, stream := range []bool{false, true} {
		args := []string{"ask", "--nats", c.url}
		if stream {
			args = append(args, "--stream")
		}
		out, err := exec.Command(binPath, append(args, "Say", "hello")...).CombinedOutput()
		if err != nil {
			t.Fatalf("ask (stream=%v): %v\n%s", stream, err, out)
		}
		if got, want := strings.TrimSpace(string(out)), codextest.Answer("Say hello", 5); got != want {
			t.Fatalf("ask (stream=%v) printed %q, want %q", stream, got, want)
		}
	}
	out, err := exec.Command(binPath, "ask", "--nats", c.url, "--model", "m", "--instructions", "x",
		`{"sim":1}`).CombinedOutput()
	if err != nil {
		t.Fatalf("ask: %v\n%s", err, out)
	}
	// A failure exits non-zero with the error.
	c.sim.Faults.Next(codextest.AtResponse, 1, codextest.Fault("failed"))
	out, err = exec.Command(binPath, "ask", "--nats", c.url, "fail please").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "upstream_error") {
		t.Fatalf("ask on failure: err %v, output %q; want non-zero exit naming upstream_error", err, out)
	}
}

func TestE2EDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	out, err := exec.Command(binPath, "demo", "--requests", "40", "--concurrency", "20", "--latency", "100ms", "--quiet").CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"req/s", "adaptive", "every request succeeded"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
}
