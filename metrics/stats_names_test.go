package metrics_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/worker"
)

// TestServiceStatsNamesDisjoint: the $SRV.STATS data a worker process publishes (cmd:
// struct{ queue.Stats; worker.StatsData }, read by the metrics' sources too) carries every field
// of both. A field name in both would vanish from the JSON without an error.
func TestServiceStatsNamesDisjoint(t *testing.T) {
	keys := func(v any) []string {
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
	st := queue.Stats{Jobs: &queue.JobStats{}} // Jobs is omitted when nil
	svc, wrk := keys(st), keys(worker.StatsData{})
	got := keys(struct {
		queue.Stats
		worker.StatsData
	}{st, worker.StatsData{}})
	want := slices.Sorted(slices.Values(append(slices.Clone(svc), wrk...)))
	if !slices.Equal(got, want) {
		t.Errorf("got fields %v, want queue's %v and the worker's %v", got, svc, wrk)
	}
}
