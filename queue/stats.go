package queue

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codexpool/codexpool/schemas"
)

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
func (s *Service) Stats() schemas.ServiceStats {
	st := schemas.ServiceStats{
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

// statsData is the endpoint data of micro's STATS: the Stats, with Config.WorkerStats beside them.
func (s *Service) statsData() any {
	st := s.Stats()
	if s.cfg.WorkerStats == nil {
		return st
	}
	return schemas.Stats{ServiceStats: st, WorkerStats: s.cfg.WorkerStats()}
}
