package dashboard

import (
	"github.com/codexpool/codexpool/schemas"
	"testing"
	"time"
)

func TestHistoryRates(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	w := func(id string, completed, failed uint64, errs uint64, latencyMS int64) schemas.Stats {
		s := schemas.Stats{ServiceStats: schemas.ServiceStats{Worker: id, Completed: completed, Failed: failed, LatencySum: time.Duration(latencyMS) * time.Millisecond, Inflight: 1}}
		if errs > 0 {
			s.Errors = map[schemas.Code]uint64{"upstream_error": errs}
		}
		return s
	}
	type step struct {
		at         time.Duration
		workers    []schemas.Stats
		throughput float64
		errors     float64
		latencyMS  float64
		inflight   int64
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "first sample has no rates", steps: []step{
			{at: 0, workers: []schemas.Stats{w("a", 100, 5, 5, 10_000)}, inflight: 1},
		}},
		{name: "rates over the interval", steps: []step{
			{at: 0, workers: []schemas.Stats{w("a", 100, 0, 0, 0)}, inflight: 1},
			{at: 2 * time.Second, workers: []schemas.Stats{w("a", 110, 2, 2, 1200)}, throughput: 5, errors: 1, latencyMS: 100, inflight: 1},
		}},
		{name: "two workers add up", steps: []step{
			{at: 0, workers: []schemas.Stats{w("a", 0, 0, 0, 0), w("b", 0, 0, 0, 0)}, inflight: 2},
			{at: time.Second, workers: []schemas.Stats{w("a", 3, 0, 0, 300), w("b", 1, 0, 0, 100)}, throughput: 4, latencyMS: 100, inflight: 2},
		}},
		{name: "a restarted worker counts from zero", steps: []step{
			{at: 0, workers: []schemas.Stats{w("a", 500, 0, 0, 50_000)}, inflight: 1},
			{at: time.Second, workers: []schemas.Stats{w("a", 2, 0, 0, 40)}, throughput: 2, latencyMS: 20, inflight: 1},
		}},
		{name: "a worker that joined later counts from zero", steps: []step{
			{at: 0, workers: []schemas.Stats{w("a", 0, 0, 0, 0)}, inflight: 1},
			{at: time.Second, workers: []schemas.Stats{w("a", 0, 0, 0, 0), w("b", 3, 0, 0, 30)}, throughput: 3, latencyMS: 10, inflight: 2},
		}},
		{name: "a worker missing from one sample is not counted twice", steps: []step{
			{at: 0, workers: []schemas.Stats{w("a", 10, 0, 0, 0), w("b", 10, 0, 0, 0)}, inflight: 2},
			{at: time.Second, workers: []schemas.Stats{w("a", 10, 0, 0, 0)}, inflight: 1},
			{at: 2 * time.Second, workers: []schemas.Stats{w("a", 10, 0, 0, 0), w("b", 12, 0, 0, 20)}, throughput: 2, latencyMS: 10, inflight: 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHistory(10)
			for i, s := range tt.steps {
				p := h.add(t0.Add(s.at), s.workers)
				if p.Throughput != s.throughput || p.Errors != s.errors || p.LatencyMS != s.latencyMS || p.Inflight != s.inflight {
					t.Errorf("step %d: got %+v, want throughput %v errors %v latency %v inflight %v", i, p, s.throughput, s.errors, s.latencyMS, s.inflight)
				}
			}
		})
	}
}

func TestHistoryRing(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name    string
		cap     int
		samples int
		since   int64 // seconds after t0; -1 = all
		want    []int64
	}{
		{name: "not full", cap: 5, samples: 3, since: -1, want: []int64{0, 1, 2}},
		{name: "full: the oldest go", cap: 3, samples: 7, since: -1, want: []int64{4, 5, 6}},
		{name: "since", cap: 3, samples: 7, since: 4, want: []int64{5, 6}},
		{name: "since the last", cap: 3, samples: 7, since: 6, want: nil},
		{name: "empty", cap: 3, samples: 0, since: -1, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHistory(tt.cap)
			for i := range tt.samples {
				h.add(t0.Add(time.Duration(i)*time.Second), nil)
			}
			since := int64(0)
			if tt.since >= 0 {
				since = t0.Add(time.Duration(tt.since) * time.Second).UnixMilli()
			}
			var got []int64
			for _, p := range h.since(since) {
				got = append(got, (p.T-t0.UnixMilli())/1000)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got points at %v s, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got points at %v s, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestHistoryDue(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name  string
		after time.Duration // since the last point; -1 = no point yet
		want  bool
	}{
		{name: "first", after: -1, want: true},
		{name: "half a second", after: 500 * time.Millisecond, want: false},
		{name: "a sample early by scheduling", after: 950 * time.Millisecond, want: true},
		{name: "a second", after: time.Second, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHistory(10)
			if tt.after >= 0 {
				h.add(t0, nil)
			}
			if got := h.due(t0.Add(max(tt.after, 0)), time.Second); got != tt.want {
				t.Errorf("due %s after the last point = %v, want %v", tt.after, got, tt.want)
			}
		})
	}
}
