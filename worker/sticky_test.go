package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// The sticky tests run a real worker against the simulator with three accounts and follow one
// session's turns by the simulator's per-account counts.

// turn runs one one-shot turn of session (the session headers' key) and returns the account
// that completed it ("" when none did) and the error.
func turn(ctx context.Context, t *testing.T, sim *codextest.Server, w *worker.Worker, session, prompt string) (string, error) {
	t.Helper()
	before := completedBy(sim)
	r, err := validateRequest(fmt.Sprintf(`{"input":%q}`, prompt))
	if err != nil {
		t.Fatal(err)
	}
	r.StickyKey = session
	_, err = w.Generate(ctx, r, nil)
	for name, n := range completedBy(sim) {
		if n > before[name] {
			return name, err
		}
	}
	return "", err
}

var stickyNames = []string{"a", "b", "c"}

func completedBy(sim *codextest.Server) map[string]int64 {
	out := map[string]int64{}
	for _, n := range stickyNames {
		out[n] = sim.Accounts.Stats(n).Completed
	}
	return out
}

func newStickyWorker(t *testing.T, cfg worker.Config, windows ...codextest.Window) (*codextest.Server, *worker.Worker) {
	t.Helper()
	var accts []codextest.Account
	for _, n := range stickyNames {
		accts = append(accts, simAccount(n, windows...))
	}
	sim := newAccountsSim(t, codextest.Options{Words: 3}, accts...)
	return sim, newAccountsWorker(t, sim, cfg, stickyNames...)
}

// TestStickySessionKeepsItsAccount: the turns of a session go to one account although load
// alone spreads them (each account has served the others' sessions meanwhile); with NoSticky
// they spread.
func TestStickySessionKeepsItsAccount(t *testing.T) {
	tests := []struct {
		name     string
		noSticky bool
		want     int // distinct accounts the session's 6 turns used; 0 = more than one
	}{
		{"sticky", false, 1},
		{"not sticky", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Usage windows make load visible: an account that served more has less headroom.
			sim, w := newStickyWorker(t, worker.Config{NoSticky: tt.noSticky}, codextest.Window{Length: time.Hour, Budget: 1000})
			ctx := testCtx(t)
			used := map[string]bool{}
			for i := range 6 {
				a, err := turn(ctx, t, sim, w, "conversation-1", fmt.Sprintf("turn %d", i))
				if err != nil {
					t.Fatal(err)
				}
				used[a] = true
				// Other sessions' first turns go where load sends them, and move the load.
				if _, err := turn(ctx, t, sim, w, fmt.Sprintf("other-%d", i), "other"); err != nil {
					t.Fatal(err)
				}
			}
			switch {
			case tt.want == 1 && len(used) != 1:
				t.Errorf("the session's turns went to %v, want one account", used)
			case tt.want == 0 && len(used) < 2:
				t.Errorf("without stickiness the session's turns went to %v only, want them spread by load", used)
			}
		})
	}
}

// TestStickyFailureKeepsTheBinding: an origin error (upstream_error) on the session's account fails that turn only; the
// next turn goes to the same account.
func TestStickyFailureKeepsTheBinding(t *testing.T) {
	sim, w := newStickyWorker(t, worker.Config{}, codextest.Window{Length: time.Hour, Budget: 1000})
	ctx := testCtx(t)
	first, err := turn(ctx, t, sim, w, "s-502", "one")
	if err != nil {
		t.Fatal(err)
	}
	sim.Faults.Next(codextest.AtResponse, 1, codextest.FaultError)
	if _, err := turn(ctx, t, sim, w, "s-502", "two"); err == nil {
		t.Fatal("the turn with the injected error succeeded, want it to fail")
	} else if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodeUpstreamError || e.Account != first {
		t.Fatalf("injected error: got %v (account %q), want upstream_error from %q", err, accountOf(err), first)
	}
	for i := range 3 {
		if _, err := turn(ctx, t, sim, w, fmt.Sprintf("other-%d", i), "other"); err != nil {
			t.Fatal(err)
		}
		got, err := turn(ctx, t, sim, w, "s-502", fmt.Sprintf("after %d", i))
		if err != nil {
			t.Fatal(err)
		}
		if got != first {
			t.Errorf("turn %d after the 502 went to %q, want %q: one failure must not move the binding", i, got, first)
		}
	}
}

func accountOf(err error) string {
	if e, ok := schemas.AsError(err); ok {
		return e.Account
	}
	return ""
}

// TestStickyExhaustedAccountMovesOnce: the session's account runs out mid-conversation; the
// next turn moves (invisibly to the caller) to another account, and every later turn sticks to
// that one.
func TestStickyExhaustedAccountMovesOnce(t *testing.T) {
	const budget = 100
	sim, w := newStickyWorker(t, worker.Config{}, codextest.Window{Length: time.Hour, Budget: budget})
	ctx := testCtx(t)
	first, err := turn(ctx, t, sim, w, "s-exhaust", "one")
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Accounts.SetUsage(first, 0, budget); err != nil {
		t.Fatal(err)
	}
	moved, err := turn(ctx, t, sim, w, "s-exhaust", "two")
	if err != nil {
		t.Fatalf("the turn that found %q exhausted: %v, want it to move and succeed", first, err)
	}
	if moved == first || moved == "" {
		t.Fatalf("the turn after the exhaustion went to %q, want another account than %q", moved, first)
	}
	for i := range 5 {
		// Other sessions load the new account, so load alone would send turns elsewhere.
		if _, err := turn(ctx, t, sim, w, fmt.Sprintf("other-%d", i), "other"); err != nil {
			t.Fatal(err)
		}
		got, err := turn(ctx, t, sim, w, "s-exhaust", fmt.Sprintf("after %d", i))
		if err != nil {
			t.Fatal(err)
		}
		if got != moved {
			t.Errorf("turn %d after the move went to %q, want %q (the session sticks to its new account)", i, got, moved)
		}
	}
	if n := sim.Accounts.Stats(first).UsageLimited; n != 1 {
		t.Errorf("the exhausted account refused %d turns, want 1 (the session moved once)", n)
	}
}
