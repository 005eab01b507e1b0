package dashboard

import (
	"github.com/codexpool/codexpool/schemas"
	"testing"
	"time"
)

// TestFleetView: an account two workers use is one row, its windows at the higher figure, its
// cooldown the later one, its counters summed; each worker keeps its own gate row.
func TestFleetView(t *testing.T) {
	reset := time.Unix(1_800_000_000, 0).UTC()
	ws := []schemas.Stats{
		{ServiceStats: schemas.ServiceStats{Worker: "w1", Completed: 3, Requests: 4, Inflight: 1, Errors: map[schemas.Code]uint64{"worker_busy": 1}},
			WorkerStats: schemas.WorkerStats{Accounts: []schemas.AccountStats{
				{Name: "alice", Inflight: 1, Requests: 3, Completed: 3, Gate: schemas.GateStats{Mode: "adaptive", SpacingMS: 250},
					Windows: []schemas.WindowUsage{{Limit: "codex", Minutes: 300, UsedPercent: 20, ResetAt: reset}, {Limit: "codex", Minutes: 10080, UsedPercent: 50}}},
				{Name: "bob", CoolingDown: true, Cooldown: &schemas.Cooldown{Until: reset, Reason: "usage limit"}},
			}}},
		{ServiceStats: schemas.ServiceStats{Worker: "w2", Completed: 5, Requests: 5},
			WorkerStats: schemas.WorkerStats{Accounts: []schemas.AccountStats{
				{Name: "alice", Requests: 5, Completed: 5, Gate: schemas.GateStats{Closed: true},
					Windows: []schemas.WindowUsage{{Limit: "codex", Minutes: 300, UsedPercent: 35, ResetAt: reset.Add(time.Minute)}, {Limit: "codex", Minutes: 10080, UsedPercent: 40}}},
				{Name: "bob", CoolingDown: true, Cooldown: &schemas.Cooldown{Until: reset.Add(time.Hour), Reason: "rate limit"}},
			}}},
	}
	tot, workers, accts, gates := fleetView(ws)
	if tot.Workers != 2 || tot.Completed != 8 || tot.Requests != 9 || tot.Errors != 1 || tot.Inflight != 1 {
		t.Errorf("totals = %+v, want 2 workers, 9 requests, 8 completed, 1 error, 1 in flight", tot)
	}
	if len(workers) != 2 || workers[0].ID != "w1" || len(workers[0].Accounts) != 2 {
		t.Errorf("workers = %+v, want w1 (with 2 accounts) and w2", workers)
	}
	if len(accts) != 2 || accts[0].Name != "alice" || accts[1].Name != "bob" {
		t.Fatalf("accounts = %+v, want alice and bob", accts)
	}
	a := accts[0]
	if a.Requests != 8 || a.Completed != 8 || a.Inflight != 1 || len(a.Workers) != 2 {
		t.Errorf("alice = %+v, want 8 requests and completed, 1 in flight, 2 workers", a)
	}
	if len(a.Windows) != 2 {
		t.Fatalf("alice's windows = %+v, want 2", a.Windows)
	}
	if w := a.Windows[0]; w.Class != Class5h || w.UsedPercent != 35 || !w.ResetAt.Equal(reset.Add(time.Minute)) {
		t.Errorf("alice's 5 h window = %+v, want 35%% (w2's, the higher), resetting with it", w)
	}
	if w := a.Windows[1]; w.Class != ClassWeekly || w.UsedPercent != 50 {
		t.Errorf("alice's weekly window = %+v, want 50%% (w1's)", w)
	}
	if b := accts[1]; !b.CoolingDown || !b.CooldownUntil.Equal(reset.Add(time.Hour)) || b.CooldownReason != "rate limit" {
		t.Errorf("bob = %+v, want cooling down until the later end, with its reason", b)
	}
	if len(gates) != 4 || gates[0].SpacingMS != 250 || gates[0].Mode != "adaptive" || !gates[2].Closed {
		t.Errorf("gates = %+v, want 4, w1/alice spacing 250 ms adaptive, w2/alice closed", gates)
	}
}
