package worker_test

import (
	"sync"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// A closed origin with Config.Accounts: concurrent requests get the gate's shared last 403, and
// naming the account on it must not write to the shared value (the race detector sees it).
// Run with -race.
func TestClosedOriginSharedErrorNoRace(t *testing.T) {
	sim := newAccountsSim(t, codextest.Options{}, simAccount("a"))
	sim.Faults.Reject(1000000, 403, 0)
	w := newAccountsWorker(t, sim, worker.Config{Policy: gate.Policy{ForbiddenBudget: 2 * time.Second}}, "a")
	ctx := testCtx(t)
	for range 3 {
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() { _ = generate(ctx, w, "hi", "") })
		}
		wg.Wait()
	}
}
