package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// tally counts client outcomes by kind, and the slowest call against its deadline.
type tally struct {
	mu      sync.Mutex
	counts  map[string]int
	workers map[string]int // successes per Codex-Worker
	sent    int
	late    []string // calls that returned later than their deadline allows
}

func newTally() *tally { return &tally{counts: map[string]int{}, workers: map[string]int{}} }

// kind names an outcome for counting.
func kind(err error) string {
	switch se, ok := schemas.AsError(err); {
	case err == nil:
		return "success"
	case ok:
		return fmt.Sprintf("%d %s", se.Status, se.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return "client timeout"
	case errors.Is(err, nats.ErrNoResponders):
		return "no responders"
	default:
		return "client error: " + err.Error()
	}
}

// call runs one Generate with deadline d and records it; the call must return by d plus slack.
func (ta *tally) call(cl *client.Client, payload []byte, d time.Duration) (*client.Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ta.mu.Lock()
	ta.sent++
	ta.mu.Unlock()
	start := time.Now()
	r, err := cl.Generate(ctx, payload, nil)
	took := time.Since(start)
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.counts[kind(err)]++
	if err == nil {
		ta.workers[r.Worker]++
	}
	if took > d+2*time.Second {
		ta.late = append(ta.late, fmt.Sprintf("%s after %s (deadline %s)", kind(err), took, d))
	}
	return r, err
}

func (ta *tally) answered() int {
	n := 0
	for k, v := range ta.counts {
		if k != "client timeout" && !strings.HasPrefix(k, "client error") {
			n += v
		}
	}
	return n
}

func (ta *tally) String() string {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	keys := make([]string, 0, len(ta.counts))
	for k := range ta.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d:", ta.sent)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, ta.counts[k])
	}
	fmt.Fprintf(&b, "; successes by worker %v", ta.workers)
	return b.String()
}

// TestNATSRestart kills the NATS server under load and starts a new one on the same port: the
// workers reconnect and serve again by themselves, and no client call outlives its deadline.
func TestNATSRestart(t *testing.T) {
	t.Parallel()
	c, ns := newClusterWith(t, codextest.Options{Words: 3, Latency: 200 * time.Millisecond}, nil)
	port := ns.Addr().(*net.TCPAddr).Port
	c.startWorker("n1")
	c.startWorker("n2")
	cl := client.New(c.nc, client.Options{RetryBusy: -1})

	before, after := newTally(), newTally()
	var restarted atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ta := before
				if restarted.Load() {
					ta = after
				}
				if _, err := ta.call(cl, request(fmt.Sprintf("load %d/%d", g, i), nil), 5*time.Second); err != nil {
					time.Sleep(50 * time.Millisecond) // pace retries while NATS is away
				}
			}
		}()
	}
	waitCond(t, 30*time.Second, "load running", func() bool {
		before.mu.Lock()
		defer before.mu.Unlock()
		return before.counts["success"] >= 10
	})

	killed := time.Now()
	ns.Shutdown()
	ns.WaitForShutdown()
	waitCond(t, 30*time.Second, "client notices the outage", func() bool { return !c.nc.IsConnected() })
	ns2 := startNATS(t, &server.Options{Host: "127.0.0.1", Port: port, NoSigs: true, NoLog: true})
	t.Cleanup(func() { ns2.Shutdown(); ns2.WaitForShutdown() })
	restarted.Store(true)
	t.Logf("NATS down for %s", time.Since(killed).Round(time.Millisecond))

	waitCond(t, 60*time.Second, "both workers serving again", func() bool {
		return c.nc.IsConnected() && countWorkers(c.nc, "codex.generate", "n1") > 0 && countWorkers(c.nc, "codex.generate", "n2") > 0
	})
	back := time.Since(killed)
	waitCond(t, 60*time.Second, "40 successes after the restart, from both workers", func() bool {
		after.mu.Lock()
		defer after.mu.Unlock()
		return after.counts["success"] >= 40 && after.workers["n1"] > 0 && after.workers["n2"] > 0
	})
	close(stop)
	wg.Wait()
	t.Logf("before the kill (incl. in flight at it): %s", before)
	t.Logf("after the restart: %s", after)
	t.Logf("workers serving again %s after the kill", back.Round(time.Millisecond))
	for _, ta := range []*tally{before, after} {
		if len(ta.late) > 0 {
			t.Errorf("calls that outlived their deadline: %v", ta.late)
		}
		for k := range ta.counts {
			if k != "success" && k != "client timeout" && k != "no responders" && !strings.HasPrefix(k, "client error: queue: request") {
				t.Errorf("unexpected outcome %q", k)
			}
		}
	}
}

// TestNATSOverload sends a burst far above capacity: 200 requests at once to 2 workers that run 5
// each against a slow origin. Every request is answered — served (possibly after being handed
// to the other worker) or worker_busy — and none is lost.
func TestNATSOverload(t *testing.T) {
	t.Parallel()
	c := newCluster(t, codextest.Options{Words: 3, Latency: time.Second})
	c.startWorker("o1", "CODEXPOOL_MAX_INFLIGHT=5")
	c.startWorker("o2", "CODEXPOOL_MAX_INFLIGHT=5")
	const n = 200
	ta := newTally()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = ta.call(c.client, request(fmt.Sprintf("overload %d", i), nil), 60*time.Second)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	t.Logf("burst of %d in %s: %s", n, took.Round(time.Millisecond), ta)
	if ta.sent != n || ta.answered() != n {
		t.Errorf("sent %d, answered %d: %d lost", ta.sent, ta.answered(), ta.sent-ta.answered())
	}
	for k := range ta.counts {
		if k != "success" && k != "429 worker_busy" {
			t.Errorf("outcome %q ×%d, want success or worker_busy", k, ta.counts[k])
		}
	}
	if ta.counts["success"] < 10 || ta.counts["429 worker_busy"] == 0 {
		t.Errorf("want at least 10 served and some worker_busy: %s", ta)
	}
	if len(ta.late) > 0 {
		t.Errorf("late calls: %v", ta.late)
	}
	var fwd, busy uint64
	for _, id := range []string{"o1", "o2"} {
		st, ok := workerStatsOf(c.nc, id)
		if !ok {
			t.Fatalf("no stats from %s", id)
		}
		t.Logf("%s: requests %d forwarded %d busy %d completed %d inflight %d", id, st.Requests, st.Forwarded, st.Busy, st.Completed, st.Inflight)
		fwd += st.Forwarded
		busy += st.Busy
	}
	if fwd == 0 || busy != uint64(ta.counts["429 worker_busy"]) {
		t.Errorf("workers forwarded %d and answered %d busy; the clients saw %d busy", fwd, busy, ta.counts["429 worker_busy"])
	}
}

// TestShutdownSigtermBurst: SIGTERM to one of 3 workers in the middle of a burst. Every request is
// answered successfully and the worker exits 0 within its grace period.
func TestShutdownSigtermBurst(t *testing.T) {
	t.Parallel()
	c := newCluster(t, codextest.Options{Words: 4, Latency: 300 * time.Millisecond})
	const grace = 5 * time.Second
	victim := c.startWorker("s1", "CODEXPOOL_SHUTDOWN_GRACE="+grace.String())
	c.startWorker("s2")
	c.startWorker("s3")
	cl := client.New(c.nc, client.Options{}) // retries worker_busy, as users' clients do
	ta := newTally()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				_, _ = ta.call(cl, request(fmt.Sprintf("burst %d/%d", g, i), nil), 60*time.Second)
			}
		}()
	}
	waitCond(t, 30*time.Second, "the victim has work in flight", func() bool {
		st, ok := workerStatsOf(c.nc, "s1")
		return ok && st.Inflight > 0
	})
	sigterm := time.Now()
	_ = victim.cmd.Process.Signal(syscall.SIGTERM)
	var exited time.Duration
	select {
	case <-victim.done:
		exited = time.Since(sigterm)
	case <-time.After(grace + 30*time.Second):
		t.Fatal("the stopped worker did not exit")
	}
	wg.Wait()
	t.Logf("SIGTERM mid-burst: %s; victim exited %v after %s (grace %s)", ta, victim.err, exited.Round(time.Millisecond), grace)
	if victim.err != nil {
		t.Errorf("victim exit: %v", victim.err)
	}
	if exited > grace+5*time.Second { // grace, then the NATS drain
		t.Errorf("victim exited %s after SIGTERM, grace is %s", exited, grace)
	}
	if ta.counts["success"] != ta.sent || len(ta.late) > 0 {
		t.Errorf("want every request served: %s; late %v", ta, ta.late)
	}
}

// TestShutdownSigkill: SIGKILL one of 3 workers with requests in flight. Its requests end with the
// client's timeout (nobody will answer them), the others keep serving, and later requests all
// succeed.
func TestShutdownSigkill(t *testing.T) {
	t.Parallel()
	c := newCluster(t, codextest.Options{Words: 4, Latency: 3 * time.Second})
	victim := c.startWorker("k1")
	c.startWorker("k2")
	c.startWorker("k3")
	const deadline = 8 * time.Second
	ta := newTally()
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = ta.call(c.client, request(fmt.Sprintf("kill %d", i), nil), deadline)
		}()
	}
	var inflight int64
	waitCond(t, 30*time.Second, "the victim has work in flight", func() bool {
		st, ok := workerStatsOf(c.nc, "k1")
		inflight = st.Inflight
		return ok && st.Inflight > 0
	})
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	wg.Wait()
	t.Logf("SIGKILL with %d in flight on the victim: %s", inflight, ta)
	if len(ta.late) > 0 {
		t.Errorf("calls outlived their deadline: %v", ta.late)
	}
	if ta.counts["client timeout"] == 0 || ta.counts["client timeout"]+ta.counts["success"] != ta.sent {
		t.Errorf("want the victim's requests to time out and the rest to succeed: %s", ta)
	}
	later := newTally()
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = later.call(c.client, request(fmt.Sprintf("after kill %d", i), nil), 30*time.Second)
		}()
	}
	wg.Wait()
	t.Logf("after the kill: %s", later)
	if later.counts["success"] != 20 {
		t.Errorf("after the kill: %s, want 20 successes", later)
	}
}
