package queue

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codexpool/codexpool/schemas"
)

// Stats are a service's true counters, published as the endpoint data of `nats micro stats`.
type Stats struct {
	Worker      string `json:"worker"`       // Codex-Worker id
	MaxInflight int    `json:"max_inflight"` // configured cap
	Draining    bool   `json:"draining"`     // Shutdown has begun
	Requests    uint64 `json:"requests"`     // messages the handler received, of any kind
	NoReply     uint64 `json:"no_reply"`     // messages without a reply subject, dropped
	// RefusedReply counts requests and jobs whose reply subject (Codex-Reply-To) starts with none
	// of Config.ReplyPrefixes: never generated, never answered (a job's result is 400).
	RefusedReply uint64 `json:"refused_reply_subject"`
	Forwarded    uint64 `json:"forwarded"` // handed back to the queue group (full or draining)
	Busy         uint64 `json:"busy"`      // answered 429 worker_busy after MaxHops
	Started      uint64 `json:"started"`   // generations started
	Inflight     int64  `json:"inflight"`  // generations running now
	Completed    uint64 `json:"completed"` // generations answered successfully
	Failed       uint64 `json:"failed"`    // generations answered with an error
	Cancelled    uint64 `json:"cancelled"` // generations stopped on the cancel subject
	// Errors counts every error reply by contract code: refusals, busy, and failed generations.
	Errors map[schemas.Code]uint64 `json:"errors"`
	// LatencySum is the summed time from receipt to the last reply message of finished
	// generations; LatencyAvg is LatencySum / (Completed+Failed).
	LatencySum time.Duration `json:"latency_sum_ns"`
	LatencyAvg time.Duration `json:"latency_avg_ns"`
	// Jobs counts durable jobs; nil when the service does not consume them.
	Jobs *JobStats `json:"jobs,omitempty"`
}

type counters struct {
	requests, noReply, forwarded, busy    atomic.Uint64
	refusedReply                          atomic.Uint64
	started, completed, failed, cancelled atomic.Uint64
	inflight, latencyNS                   atomic.Int64

	mu     sync.Mutex
	errors map[schemas.Code]uint64
}

func (c *counters) countError(code schemas.Code) {
	c.mu.Lock()
	c.errors[code]++
	c.mu.Unlock()
}

// Stats returns a snapshot of the service's counters.
func (s *Service) Stats() Stats {
	st := Stats{
		Worker:       s.cfg.WorkerID,
		MaxInflight:  s.cfg.MaxInflight,
		Requests:     s.st.requests.Load(),
		NoReply:      s.st.noReply.Load(),
		RefusedReply: s.st.refusedReply.Load(),
		Forwarded:    s.st.forwarded.Load(),
		Busy:         s.st.busy.Load(),
		Started:      s.st.started.Load(),
		Inflight:     s.st.inflight.Load(),
		Completed:    s.st.completed.Load(),
		Failed:       s.st.failed.Load(),
		Cancelled:    s.st.cancelled.Load(),
		LatencySum:   time.Duration(s.st.latencyNS.Load()),
	}
	st.Draining = s.drain.isDraining()
	if n := st.Completed + st.Failed; n > 0 {
		st.LatencyAvg = st.LatencySum / time.Duration(n)
	}
	if s.jobs != nil {
		js := s.jobs.st.snapshot()
		st.Jobs = &js
	}
	s.st.mu.Lock()
	st.Errors = maps.Clone(s.st.errors)
	s.st.mu.Unlock()
	return st
}

// statsData is the endpoint data of micro's STATS: Config.StatsData of the Stats, else the Stats.
func (s *Service) statsData() any {
	st := s.Stats()
	if s.cfg.StatsData == nil {
		return st
	}
	return s.cfg.StatsData(st)
}
