package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/worker/codextest"
)

// Durable jobs end to end: the real binary as workers, a real nats-server with a file store
// (in this process), the simulator.

// jobsEnv is the environment of a worker that consumes jobs with short waits.
var jobsEnv = []string{"CODEXPOOL_JOBS=on", "CODEXPOOL_JOBS_ACK_WAIT=2s", "CODEXPOOL_WS_REUSE=false"}

// startJSServer starts a JetStream server with a file store on a fixed port (so it can be
// restarted on the same address).
func startJSServer(t *testing.T, port int, store string) *server.Server {
	t.Helper()
	ns, err := embedded.Start("127.0.0.1:"+strconv.Itoa(port), nil, embedded.WithJetStream(store))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func newJobsCluster(t *testing.T, simOpts codextest.Options) (*cluster, func() *server.Server, func()) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	port, store := testutil.FreePort(t), t.TempDir()
	ns := startJSServer(t, port, store)
	stop := func() { ns.Shutdown(); ns.WaitForShutdown() }
	restart := func() *server.Server { ns = startJSServer(t, port, store); return ns }
	t.Cleanup(func() { stop() })
	simOpts.Token = simToken
	sim := codextest.NewServer(simOpts)
	t.Cleanup(sim.Close)
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := &cluster{t: t, url: ns.ClientURL(), nc: nc, sim: sim, client: client.New(nc, client.Options{RetryBusy: -1})}
	return c, restart, stop
}

// submitJobs submits n jobs "job-<i>" with prompt "<prefix> <i>" and returns their ids.
func submitJobs(t *testing.T, cl *client.Client, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%d", strings.ReplaceAll(prefix, " ", "-"), i)
		body := request(fmt.Sprintf("%s %d", prefix, i), nil)
		if _, err := cl.Submit(ctxT(t, 30*time.Second), body, client.SubmitOptions{ID: ids[i]}); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// waitAllResults waits until every job has a result and checks each is the simulator's answer.
func waitAllResults(t *testing.T, cl *client.Client, prefix string, ids []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for i, id := range ids {
		for {
			r, err := cl.Result(ctxT(t, 10*time.Second), id)
			if err == nil {
				if want := codextest.Answer(fmt.Sprintf("%s %d", prefix, i), codextest.DefaultWords); r.OutputText != want {
					t.Fatalf("job %s: output_text %q, want %q", id, r.OutputText, want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s has no correct result after %s: %v", id, within, err)
			}
			time.Sleep(50 * time.Millisecond) // polling stored results with a deadline
		}
	}
}

// TestE2EJobsSurviveSIGKILL is target 1: a worker killed with 20 jobs in flight loses none; its
// jobs come back after the ack wait and another worker finishes them.
func TestE2EJobsSurviveSIGKILL(t *testing.T) {
	c, _, _ := newJobsCluster(t, codextest.Options{Latency: 3 * time.Second})
	victim := c.startWorker("victim", append(jobsEnv, "CODEXPOOL_MAX_INFLIGHT=20")...)
	ids := submitJobs(t, c.client, "kill test", 30)
	waitCond(t, 30*time.Second, "20 generations in flight at the victim", func() bool {
		st := c.sim.Stats()
		return st.Responses-st.Completed >= 20
	})
	_ = victim.cmd.Process.Kill()
	<-victim.done
	killedInFlight := c.sim.Stats().Responses - c.sim.Stats().Completed
	c.startWorker("rescuer", append(jobsEnv, "CODEXPOOL_MAX_INFLIGHT=30")...)
	waitAllResults(t, c.client, "kill test", ids, 90*time.Second)
	dups := c.sim.Stats().Responses - int64(len(ids))
	t.Logf("SIGKILL with %d in flight: %d/%d jobs finished with the right answer, %d duplicate generations", killedInFlight, len(ids), len(ids), dups)
	if dups > 20 {
		t.Errorf("%d duplicate generations, want at most the killed worker's 20 in flight", dups)
	}
}

// TestE2EJobsSurviveNATSRestart is target 2: nats-server (file store) stopped and restarted
// mid-batch; every job completes, none lost.
func TestE2EJobsSurviveNATSRestart(t *testing.T) {
	c, restart, stop := newJobsCluster(t, codextest.Options{Latency: 300 * time.Millisecond})
	c.startWorker("w1", append(jobsEnv, "CODEXPOOL_MAX_INFLIGHT=8")...)
	ids := submitJobs(t, c.client, "restart test", 60)
	waitCond(t, 30*time.Second, "a third of the batch done", func() bool { return c.sim.Stats().Completed >= 20 })
	stop()
	restart()
	waitAllResults(t, c.client, "restart test", ids, 2*time.Minute)
	t.Logf("NATS restarted after %d of 60 generations: all 60 results correct; %d generations in all", 20, c.sim.Stats().Completed)
}

// TestE2EJobsSurviveClusterNodeLoss is target 3: a 3-node cluster, the stream and bucket R3, one
// node killed mid-batch; every job completes.
func TestE2EJobsSurviveClusterNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	nodes := startNATSCluster(t, 3)
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.ClientURL()
	}
	all := strings.Join(urls, ",")
	sim := codextest.NewServer(codextest.Options{Token: simToken, Latency: 300 * time.Millisecond})
	t.Cleanup(sim.Close)
	nc, err := nats.Connect(all, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := &cluster{t: t, url: all, nc: nc, sim: sim, client: client.New(nc, client.Options{RetryBusy: -1})}
	c.startWorker("r3-a", append(jobsEnv, "CODEXPOOL_MAX_INFLIGHT=8", "CODEXPOOL_JOBS_REPLICAS=3")...)
	c.startWorker("r3-b", append(jobsEnv, "CODEXPOOL_MAX_INFLIGHT=8", "CODEXPOOL_JOBS_REPLICAS=3")...)
	ids := submitJobs(t, c.client, "cluster test", 60)
	waitCond(t, 30*time.Second, "a third of the batch done", func() bool { return sim.Stats().Completed >= 20 })
	nodes[0].Shutdown() // the first server: where the stream was most likely created
	nodes[0].WaitForShutdown()
	waitAllResults(t, c.client, "cluster test", ids, 2*time.Minute)
	t.Logf("3-node cluster, R3, one node killed after 20 of 60: all 60 results correct")
}

// startNATSCluster starts n clustered JetStream servers in this process and waits until the
// JetStream meta group has a leader.
func startNATSCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	cports := make([]int, n)
	for i := range cports {
		cports[i] = testutil.FreePort(t)
	}
	var routes []string
	for _, p := range cports {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p))
	}
	nodes := make([]*server.Server, n)
	for i := range n {
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
			JetStream: true, StoreDir: filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i+1)),
			Cluster: server.ClusterOpts{Name: "codexpool-test", Host: "127.0.0.1", Port: cports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		nodes[i] = ns
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	}
	for _, ns := range nodes {
		if !ns.ReadyForConnections(20 * time.Second) {
			t.Fatal("cluster node not ready")
		}
	}
	waitCond(t, 60*time.Second, "a JetStream meta leader", func() bool {
		for _, ns := range nodes {
			if ns.JetStreamIsLeader() {
				return true
			}
		}
		return false
	})
	return nodes
}

// TestE2EBatchCommand: `codexpool batch` submits a file, writes every result in the matching
// format and exits 1 because a line failed; a rerun with --keep-failed submits nothing, one
// without submits the failed line again, and the file moved elsewhere with a new line above the
// others (and without the failing one) runs only the new line and exits 0.
func TestE2EBatchCommand(t *testing.T) {
	c, _, _ := newJobsCluster(t, codextest.Options{Latency: 50 * time.Millisecond})
	c.startWorker("batch-w", jobsEnv...)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "in.out.jsonl")
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf(`{"input":"batch %d"}`, i))
	}
	lines = append(lines, `{"custom_id":"req-a","method":"POST","url":"/v1/responses","body":{"input":"batch api"}}`)
	writeLines := func(path string, lines ...string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeLines(in, append(lines, `{"input":""}`)...)
	runBatchCmd := func(wantCode int, args ...string) string {
		t.Helper()
		var stderr testutil.SyncBuffer
		err := run(ctxT(t, time.Minute), append([]string{"batch", "--nats", c.url, "--poll", "500ms", "-o", out}, args...),
			os.Getenv, strings.NewReader(""), &testutil.SyncBuffer{}, &stderr)
		var ee exitError
		switch {
		case wantCode == 0 && err != nil, wantCode != 0 && (!errors.As(err, &ee) || ee.code != wantCode):
			t.Fatalf("batch %v: %v, want exit %d\n%s", args, err, wantCode, stderr.String())
		}
		return stderr.String()
	}
	summary := runBatchCmd(1, in)
	if !strings.Contains(summary, "32 jobs: 31 ok, 1 failed") {
		t.Errorf("summary %q, want 32 jobs: 31 ok, 1 failed", summary)
	}
	readOut := func() string {
		t.Helper()
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	got := readOut()
	if n := strings.Count(got, "\n"); n != 32 {
		t.Errorf("%d result lines, want 32", n)
	}
	if !strings.Contains(got, codextest.Answer("batch 7", codextest.DefaultWords)) ||
		!strings.Contains(got, `"custom_id":"req-a"`) || !strings.Contains(got, `"status_code":200`) ||
		!strings.Contains(got, `"status":400`) {
		t.Errorf("results lack an answer, the Batch API line or the refusal:\n%s", got)
	}
	before := c.sim.Stats().Responses
	summary = runBatchCmd(1, "--keep-failed", in)
	if !strings.Contains(summary, "(32 from an earlier run, 1 of them failed)") || c.sim.Stats().Responses != before {
		t.Errorf("rerun keeping failures: %q and %d new generations, want everything from the earlier run and none", summary, c.sim.Stats().Responses-before)
	}
	summary = runBatchCmd(1, in)
	if !strings.Contains(summary, "32 jobs: 0 ok, 1 failed (31 from an earlier run)") || c.sim.Stats().Responses != before {
		t.Errorf("rerun: %q and %d new generations, want the failed line again (refused before the origin) and none", summary, c.sim.Stats().Responses-before)
	}
	if n := strings.Count(readOut(), "\n"); n != 33 {
		t.Errorf("%d result lines after the reruns, want 33 (the failed line's second attempt)", n)
	}
	moved := filepath.Join(t.TempDir(), "moved.jsonl")
	writeLines(moved, append([]string{`{"input":"a new line"}`}, lines...)...)
	summary = runBatchCmd(0, moved)
	if !strings.Contains(summary, "32 jobs: 1 ok, 0 failed (31 from an earlier run)") || c.sim.Stats().Responses != before+1 {
		t.Errorf("moved file with a line inserted: %q and %d new generations, want only the new line run", summary, c.sim.Stats().Responses-before)
	}
}

// TestE2ECancelStream is issue 15's target 4: a 10 s streamed generation cancelled after its first
// event. The origin sees the socket closed within 1 s, the client gets 499 cancelled and then the
// sentinel, and the worker's slot is free.
func TestE2ECancelStream(t *testing.T) {
	c := newCluster(t, codextest.Options{Latency: 10 * time.Second, Words: 5})
	c.startWorker("w-cancel")
	inbox := c.nc.NewRespInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	m := &nats.Msg{Subject: "codex.generate", Reply: inbox, Data: request("a long one", map[string]any{"stream": true}),
		Header: nats.Header{"Codex-Request-Id": {"e2e-cancel-1"}}}
	if err := c.nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no first event: %v", err)
	}
	cancelled := time.Now()
	if err := c.nc.Publish("codex.cancel", []byte("e2e-cancel-1")); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.sim.WaitAborts(actx, 1); err != nil {
		t.Fatalf("the origin did not see the socket closed within 1 s of the cancel: %v", err)
	}
	seen := time.Since(cancelled)
	var last *nats.Msg
	for {
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("stream did not end: %v", err)
		}
		if len(msg.Data) == 0 {
			break
		}
		last = msg
	}
	if last == nil || last.Header.Get("Nats-Service-Error-Code") != "499" || !strings.Contains(string(last.Data), `"cancelled"`) {
		t.Fatalf("last message before the sentinel: %v, want the 499 cancelled error", last)
	}
	waitCond(t, 5*time.Second, "in flight back to 0", func() bool {
		st, ok := workerStatsOf(c.nc, "w-cancel")
		return ok && st.Inflight == 0
	})
	t.Logf("cancel -> origin saw the socket closed after %s; client got 499 cancelled, then the sentinel; in flight 0", seen.Round(time.Microsecond))
}

// TestE2EAskCtrlC: `codexpool ask` publishes the request id on codex.cancel when interrupted.
func TestE2EAskCtrlC(t *testing.T) {
	c := newCluster(t, codextest.Options{Latency: 10 * time.Second})
	c.startWorker("w-ask-cancel")
	cmd := exec.Command(binPath, "ask", "--stream", "--nats", c.url, "interrupt me")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitCond(t, 10*time.Second, "the generation to start at the origin", func() bool {
		st := c.sim.Stats()
		return st.Responses-st.Completed >= 1
	})
	_ = cmd.Process.Signal(os.Interrupt)
	actx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.sim.WaitAborts(actx, 1); err != nil {
		t.Errorf("the origin did not see the socket closed within 1 s of Ctrl-C: %v\n%s", err, out.String())
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(out.String(), "cancelled") {
		t.Errorf("ask after Ctrl-C: %v, output %q; want exit 130 saying cancelled", err, out.String())
	}
}

// TestE2EClosedOrigin is issue 12's target 4: an origin that refuses every upgrade. Without a
// Codex-Timeout, one request is answered 403 within 10 s; 50 at once are all answered within 10 s
// with at most 15 upgrade attempts in all; once the origin accepts again, a request succeeds
// within 10 s.
func TestE2EClosedOrigin(t *testing.T) {
	c := newCluster(t, codextest.Options{})
	c.startWorker("w-closed", "CODEXPOOL_WS_REUSE=false")
	c.sim.Faults.Reject(1<<30, 403, 0)
	raw := func(input string) (*nats.Msg, time.Duration) {
		start := time.Now()
		m, err := c.nc.RequestMsg(&nats.Msg{Subject: "codex.generate", Data: request(input, nil), Header: nats.Header{}}, 30*time.Second)
		if err != nil {
			t.Errorf("%s: %v", input, err)
			return nil, time.Since(start)
		}
		return m, time.Since(start)
	}
	m, took := raw("one")
	if m == nil || m.Header.Get("Nats-Service-Error-Code") != "403" || took > 10*time.Second {
		t.Fatalf("one request: %v after %s, want 403 within 10 s", m, took)
	}
	t.Logf("closed origin: one request answered 403 after %s, %d attempts", took.Round(time.Millisecond), c.sim.Stats().Rejected403)
	before := c.sim.Stats().Rejected403
	var wg sync.WaitGroup
	var slowest atomic.Int64
	var not403 atomic.Int64
	for i := range 50 {
		wg.Go(func() {
			m, took := raw(fmt.Sprintf("many %d", i))
			if m == nil || m.Header.Get("Nats-Service-Error-Code") != "403" {
				not403.Add(1)
			}
			for d := int64(took); ; {
				old := slowest.Load()
				if d <= old || slowest.CompareAndSwap(old, d) {
					break
				}
			}
		})
	}
	wg.Wait()
	attempts := c.sim.Stats().Rejected403 - before
	t.Logf("closed origin: 50 concurrent answered within %s, %d upgrade attempts", time.Duration(slowest.Load()).Round(time.Millisecond), attempts)
	if not403.Load() > 0 || time.Duration(slowest.Load()) > 10*time.Second || attempts > 15 {
		t.Errorf("50 concurrent: %d not 403, slowest %s, %d attempts; want all 403 within 10 s, <= 15 attempts",
			not403.Load(), time.Duration(slowest.Load()), attempts)
	}
	c.sim.Faults.Clear()
	c.sim.ResetStats() // the origin opens again
	m, took = raw("after reopening")
	if m == nil || m.Header.Get("Nats-Service-Error-Code") != "" || took > 10*time.Second {
		t.Errorf("after the origin reopened: %v after %s, want success within 10 s", m, took)
	}
	t.Logf("closed origin reopened: a request succeeded after %s", took.Round(time.Millisecond))
}
