package schemas_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/codexpool/codexpool/schemas"
)

// keys returns the top-level JSON names of v, sorted.
func keys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(m))
}

// TestStatsNamesDisjoint: Stats flattens the service's and the worker's fields into one object;
// a name in both would vanish from the JSON without an error.
func TestStatsNamesDisjoint(t *testing.T) {
	svc := schemas.ServiceStats{Jobs: &schemas.JobStats{}} // Jobs is omitted when nil
	got := keys(t, schemas.Stats{ServiceStats: svc})
	want := slices.Sorted(slices.Values(append(keys(t, svc), keys(t, schemas.WorkerStats{})...)))
	if !slices.Equal(got, want) {
		t.Errorf("got fields %v, want the service's and the worker's %v", got, want)
	}
}

// TestStatsRoundTrip: an account's cooldown (an embedded pointer, flattened) and its windows
// survive encoding and decoding, the way the gateway and the dashboard read a worker's stats.
func TestStatsRoundTrip(t *testing.T) {
	in := schemas.Stats{WorkerStats: schemas.WorkerStats{Accounts: []schemas.AccountStats{
		{Name: "a", CoolingDown: true, Cooldown: &schemas.Cooldown{LeftMS: 1500, Reason: "usage limit"},
			Windows: []schemas.WindowUsage{{Limit: "codex", Minutes: 300, UsedPercent: 42.5}}},
		{Name: "b"},
	}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out schemas.Stats
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	a, z := out.Accounts[0], out.Accounts[1]
	if a.Cooldown == nil || a.Reason != "usage limit" || a.LeftMS != 1500 || a.Windows[0].UsedPercent != 42.5 {
		t.Errorf("account a decoded as %+v (cooldown %+v), want its cooldown and window", a, a.Cooldown)
	}
	if z.Cooldown != nil {
		t.Errorf("account b decoded with a cooldown %+v, want none (not cooling down)", z.Cooldown)
	}
}
