package worker_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestStatsDataFieldNames: the JSON field names of the worker's stats, which NATS clients read in
// `nats micro stats`, are those of the map the worker published before StatsData was a type.
func TestStatsDataFieldNames(t *testing.T) {
	hour := codextest.Window{Length: time.Hour, Budget: 100}
	sim := newAccountsSim(t, codextest.Options{}, simAccount("a", hour), simAccount("b", hour))
	if err := sim.Accounts.SetUsage("a", 0, 100); err != nil {
		t.Fatal(err)
	}
	w := newAccountsWorker(t, sim, worker.Config{}, "a", "b")
	if err := generate(testCtx(t), w, "hi", ""); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(w.StatsData())
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	gateKeys := "closed epoch failures fleet_accepted_per_s in_flight mode peers queued rejections signals spacing_ms starts streak successes waited_ms window"
	accountKeys := "answered_cooling completed cooldowns cooling_down gate inflight last_call limited max_used_percent moved name proxy_failures requests unauthorized upstream windows"
	accounts := data["accounts"].([]any)
	cooling, idle := accounts[0].(map[string]any), accounts[1].(map[string]any)
	tests := []struct {
		name string
		obj  any
		want string
	}{
		{"top level", data, "accounts gate upstream"},
		{"gate", data["gate"], gateKeys},
		{"gate signals", data["gate"].(map[string]any)["signals"], "applied doubted flooded holds_contradicted invalid peers_doubted stale unknown"},
		{"account cooling down", cooling, accountKeys + " cooldown_left_ms cooldown_reason cooldown_until"},
		{"account not cooling down", idle, accountKeys},
		{"account gate", idle["gate"], gateKeys},
		{"usage window", idle["windows"].([]any)[0], "limit projected_percent reset_at used_percent window_minutes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(tt.obj.(map[string]any)))
			want := strings.Fields(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("got fields %v, want %v", got, want)
			}
		})
	}
}
