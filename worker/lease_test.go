package worker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestAccountMaxConcurrent: an account with MaxConcurrent 2 never runs more than 2 at once at
// the origin, while another account takes the rest; requests that find every slot held wait
// (up to AccountQueueTimeout), then get 429 worker_busy with a retry time.
func TestAccountMaxConcurrent(t *testing.T) {
	tests := []struct {
		name      string
		accounts  []string
		timeout   time.Duration
		wantBusy  bool
		wantOther bool
	}{
		{name: "one account, queue long enough", accounts: []string{"capped"}, timeout: 30 * time.Second},
		{name: "one account, short queue", accounts: []string{"capped"}, timeout: 150 * time.Millisecond, wantBusy: true},
		{name: "another account takes the rest", accounts: []string{"capped", "free"}, timeout: 30 * time.Second, wantOther: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := newAccountsSim(t, codextest.Options{Latency: 200 * time.Millisecond, Words: 3}, simAccount("capped"), simAccount("free"))
			cfg := worker.Config{AccountQueueTimeout: tt.timeout}
			for _, n := range tt.accounts {
				a := worker.Account{Name: n, Token: tokenOf(n)}
				if n == "capped" {
					a.MaxConcurrent = 2
				}
				cfg.Accounts = append(cfg.Accounts, a)
			}
			w := newAccountsWorker(t, sim, cfg)
			ctx := testCtx(t)
			var mu sync.Mutex
			ok, busy := 0, 0
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					err := generate(ctx, w, fmt.Sprintf("capped %d", i), "")
					mu.Lock()
					defer mu.Unlock()
					switch e, isErr := schemas.AsError(err); {
					case err == nil:
						ok++
					case isErr && e.Code == schemas.CodeWorkerBusy && e.Status == 429 && e.RetryAfter > 0:
						busy++
					default:
						t.Errorf("request %d: %v, want ok or worker_busy with a retry time", i, err)
					}
				})
			}
			wg.Wait()
			capped, free := sim.Accounts.Stats("capped"), sim.Accounts.Stats("free")
			t.Logf("%d ok, %d worker_busy; capped ran at most %d at once, free %d", ok, busy, capped.MaxConcurrent, free.MaxConcurrent)
			if capped.MaxConcurrent > 2 {
				t.Errorf("the origin saw %d at once for the capped account, want at most 2", capped.MaxConcurrent)
			}
			if tt.wantBusy != (busy > 0) || ok+busy != 8 {
				t.Errorf("%d ok, %d worker_busy; want busy answers: %v", ok, busy, tt.wantBusy)
			}
			if tt.wantOther != (free.Completed > 0) {
				t.Errorf("the free account completed %d, want some: %v", free.Completed, tt.wantOther)
			}
		})
	}
}
