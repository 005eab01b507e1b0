package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2EAccountMaxConcurrent is issue 25's target 4 with the real binary: max_concurrent: 2 on
// an account, 3 workers on one JetStream server, 30 requests at concurrency 12: the origin never
// sees more than 2 at once for the account, and every request ends ok or worker_busy with a retry
// time. Then the workers holding the slots are SIGKILLed mid-generation: a request to a
// surviving worker gets a slot within 10 s.
func TestE2EAccountMaxConcurrent(t *testing.T) {
	c, _, _ := newJobsCluster(t, codextest.Options{Words: 3, Latency: 200 * time.Millisecond,
		Accounts: []codextest.Account{{Name: "capped", Token: acctToken("capped")}}})
	file := writeAccounts(t, fmt.Sprintf("- {name: capped, token: %s, max_concurrent: 2}\n", acctToken("capped")))
	env := []string{"CODEXPOOL_ACCOUNTS=" + file, "CODEXPOOL_JOBS=off"} // the default lease TTL, 6 s
	workers := map[string]*proc{}
	for _, id := range []string{"wl1", "wl2", "wl3"} {
		workers[id] = c.startWorker(id, env...)
	}
	ok, busy := runCapped(t, c, 30, 12)
	st := c.sim.Accounts.Stats("capped")
	t.Logf("30 requests at concurrency 12 over 3 workers: %d ok, %d worker_busy; the origin saw at most %d at once for the account",
		ok, busy, st.MaxConcurrent)
	if st.MaxConcurrent > 2 {
		t.Errorf("the origin saw %d generations at once for the account, want at most 2 (max_concurrent)", st.MaxConcurrent)
	}
	if ok+busy != 30 || ok == 0 {
		t.Errorf("%d ok and %d worker_busy of 30, want every request to end in one of them", ok, busy)
	}

	// Two slow generations take both slots; their workers are killed.
	// Their callers get no reply (the workers die); the test does not wait for them.
	slowCtx, cancelSlow := context.WithCancel(context.Background())
	var slow sync.WaitGroup
	defer slow.Wait()
	defer cancelSlow()
	for i := range 2 {
		slow.Go(func() {
			_, _ = c.client.Generate(slowCtx, request(fmt.Sprintf("slow %d", i), map[string]any{"metadata": map[string]string{"sim_latency_ms": "30000"}}), nil)
		})
	}
	owners := slotOwners(t, c, 2)
	for _, id := range owners {
		_ = workers[id].cmd.Process.Signal(syscall.SIGKILL)
		workers[id].waitExit(t, 10*time.Second)
	}
	killed := time.Now()
	// The request must go to the worker left, not to a dead one's subscription that the server
	// has not dropped yet (a request nobody answers): wait until the server says no one serves
	// the killed workers' own subjects.
	waitFor(t, 10*time.Second, "the server to drop the killed workers' subscriptions", func() bool {
		for _, id := range owners {
			_, err := c.nc.Request(schemas.WorkerSubject("codex.generate", id), nil, time.Second)
			if !errors.Is(err, nats.ErrNoResponders) {
				return false
			}
		}
		return true
	})
	reply, err := c.client.Generate(ctxT(t, 30*time.Second), request("after the kill", nil), nil)
	took := time.Since(killed)
	if err != nil {
		t.Fatalf("a request after the slot holders %v were killed: %v", owners, err)
	}
	t.Logf("slot holders %v SIGKILLed; a request on %s got a slot and finished %s later", owners, reply.Worker, took.Round(10*time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("the killed workers' slots came back after %s, want within 10 s", took)
	}
}

// runCapped sends n requests at concurrency conc and counts the ok and worker_busy answers;
// anything else fails the test.
func runCapped(t *testing.T, c *cluster, n, conc int) (ok, busy int) {
	t.Helper()
	jobs := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := range jobs {
				_, err := c.client.Generate(ctxT(t, 60*time.Second), request(fmt.Sprintf("capped %d", i), nil), nil)
				mu.Lock()
				switch e, isErr := schemas.AsError(err); {
				case err == nil:
					ok++
				case isErr && e.Code == schemas.CodeWorkerBusy && e.RetryAfter > 0:
					busy++
				default:
					t.Errorf("request %d: %v, want ok or worker_busy with a retry time", i, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return ok, busy
}

// slotOwners waits until want slots are held in the leases bucket and returns their holders.
func slotOwners(t *testing.T, c *cluster, want int) []string {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	js, err := jetstream.New(c.nc)
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		held := 0
		if kv, err := js.KeyValue(ctx, queue.DefaultLeasesBucket); err == nil {
			owners, held = heldBy(ctx, kv)
		}
		if held >= want {
			return owners
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d slots held after 20 s (by %v), want %d", held, owners, want)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// heldBy returns the holders of the bucket's slots (each worker once) and how many are held.
func heldBy(ctx context.Context, kv jetstream.KeyValue) (owners []string, held int) {
	keys, _ := kv.Keys(ctx)
	seen := map[string]bool{}
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil || !strings.HasPrefix(string(e.Value()), "wl") {
			continue
		}
		held++
		if v := string(e.Value()); !seen[v] {
			seen[v] = true
			owners = append(owners, v)
		}
	}
	return owners, held
}
