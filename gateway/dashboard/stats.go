package dashboard

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/nats-io/nats.go/micro"
)

// workerStats is the part of a worker's micro STATS endpoint data the page shows: queue.Stats
// and worker.StatsData flattened into one object (see the contract's "discovery and live
// stats"). Only the fields read here are decoded.
type workerStats struct {
	Worker      string            `json:"worker"`
	MaxInflight int               `json:"max_inflight"`
	Draining    bool              `json:"draining"`
	Requests    uint64            `json:"requests"`
	Forwarded   uint64            `json:"forwarded"`
	Busy        uint64            `json:"busy"`
	Started     uint64            `json:"started"`
	Inflight    int64             `json:"inflight"`
	Completed   uint64            `json:"completed"`
	Failed      uint64            `json:"failed"`
	Cancelled   uint64            `json:"cancelled"`
	Errors      map[string]uint64 `json:"errors"`
	LatencySum  int64             `json:"latency_sum_ns"`
	LatencyAvg  int64             `json:"latency_avg_ns"`
	Upstream    struct {
		Open int64 `json:"open"`
	} `json:"upstream"`
	Accounts []accountStats `json:"accounts"`
}

// accountStats is one account of a worker's stats (worker.AccountData).
type accountStats struct {
	Name          string        `json:"name"`
	Windows       []windowStats `json:"windows"`
	CoolingDown   bool          `json:"cooling_down"`
	CooldownUntil time.Time     `json:"cooldown_until"`
	Reason        string        `json:"cooldown_reason"`
	Inflight      int           `json:"inflight"`
	Requests      int64         `json:"requests"`
	Completed     int64         `json:"completed"`
	Limited       int64         `json:"limited"`
	Gate          gateStats     `json:"gate"`
}

// windowStats is one usage window (worker.WindowUsage).
type windowStats struct {
	Limit       string    `json:"limit"`
	Minutes     int       `json:"window_minutes"`
	UsedPercent float64   `json:"used_percent"`
	ResetAt     time.Time `json:"reset_at"`
}

// gateStats is an account's connect gate (worker.GateData).
type gateStats struct {
	Mode       string `json:"mode"`
	SpacingMS  int64  `json:"spacing_ms"`
	Closed     bool   `json:"closed"`
	InFlight   int    `json:"in_flight"`
	Queued     int    `json:"queued"`
	Rejections int64  `json:"rejections"`
	Peers      int    `json:"peers"`
}

// errorCount is the number of error replies of every code.
func (s workerStats) errorCount() uint64 {
	var n uint64
	for _, v := range s.Errors {
		n += v
	}
	return n
}

// decodeWorkers reads the endpoint data of each STATS reply, one worker per reply, sorted by
// worker id; a reply without decodable data (not a codexpool worker) is skipped.
func decodeWorkers(replies []micro.Stats) []workerStats {
	var out []workerStats
	for _, r := range replies {
		for _, ep := range r.Endpoints {
			if ep == nil || len(ep.Data) == 0 {
				continue
			}
			var s workerStats
			if json.Unmarshal(ep.Data, &s) != nil || s.Worker == "" {
				continue
			}
			out = append(out, s)
			break
		}
	}
	slices.SortFunc(out, func(a, b workerStats) int { return cmp.Compare(a.Worker, b.Worker) })
	return out
}
