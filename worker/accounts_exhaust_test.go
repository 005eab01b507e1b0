package worker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestAccountsExhaustionRepeated is issue 26's accounts case, repeated 20 times: three accounts
// shared by two workers, one account with a small budget, 60 requests at concurrency 10 spread
// over the workers. In every run each worker sends the small account at most one request after
// its exhaustion (the one that finds it exhausted, and moves).
func TestAccountsExhaustionRepeated(t *testing.T) {
	const runs, budget = 20, 4
	bad := 0
	for run := range runs {
		limited := exhaustOnce(t, budget)
		for i, n := range limited {
			if n > 1 {
				bad++
				t.Errorf("run %d: worker %d sent the exhausted account %d requests after its exhaustion, want at most 1", run, i, n)
			}
		}
	}
	t.Logf("%d of %d runs with at most one request per worker after the exhaustion", runs-bad, runs)
}

// exhaustOnce runs the scenario once and returns how many of each worker's requests the small
// account refused.
func exhaustOnce(t *testing.T, budget int) []int64 {
	t.Helper()
	sim := newAccountsSim(t, codextest.Options{Latency: 20 * time.Millisecond, Words: 3},
		simAccount("big1"), simAccount("big2"), simAccount("small", codextest.Window{Length: time.Hour, Budget: budget}))
	ws := []*worker.Worker{
		newAccountsWorker(t, sim, worker.Config{}, "big1", "big2", "small"),
		newAccountsWorker(t, sim, worker.Config{}, "big1", "big2", "small"),
	}
	ctx := testCtx(t)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for c := range 10 {
		wg.Go(func() {
			for i := range jobs {
				if err := generate(ctx, ws[(c+i)%len(ws)], fmt.Sprintf("exhaust %d", i), ""); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range 60 {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if got := sim.Accounts.Stats("small").Completed; got < int64(budget) {
		t.Errorf("small completed %d, want its budget %d used up", got, budget)
	}
	out := make([]int64, len(ws))
	for i, w := range ws {
		out[i] = accountStats(w, "small").Limited
	}
	return out
}
