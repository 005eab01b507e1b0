package dashboard

import (
	"github.com/codexpool/codexpool/schemas"
	"math"
	"time"
)

// Point is one sample of the charts: rates over the interval since the previous sample.
type Point struct {
	T          int64   `json:"t"`          // Unix milliseconds
	Throughput float64 `json:"throughput"` // generations completed per second
	Errors     float64 `json:"errors"`     // error replies per second (any code)
	LatencyMS  float64 `json:"latency_ms"` // mean latency of the generations finished; 0 = none
	Inflight   int64   `json:"inflight"`   // generations running at the sample
}

// forgetAfter is how long a worker that no longer answers keeps its last counters, so that a
// reply missed in one sample does not count its whole history as new when it comes back.
const forgetAfter = 5 * time.Minute

// history is the charts' ring of points and the counters of the previous sample, from which
// each point's rates are computed. Not safe for concurrent use: the Dashboard's mutex guards it.
type history struct {
	points []Point // a ring of cap(points) once full; next is the oldest
	next   int
	prev   map[string]seen // by worker id
	prevT  time.Time
}

// seen is a worker's counters at its last sample.
type seen struct {
	at                          time.Time
	completed, failed, errCount uint64
	latencyNS                   int64
}

func newHistory(n int) *history {
	return &history{points: make([]Point, 0, n), prev: map[string]seen{}}
}

// add computes the point at now from the workers' counters and appends it, dropping the oldest
// when the ring is full. The first sample has no interval: its rates are 0. A worker seen for
// the first time after that counts from zero (it started since); counters that went down
// (a restarted worker) count from zero too.
func (h *history) add(now time.Time, ws []schemas.Stats) Point {
	p := Point{T: now.UnixMilli()}
	var completed, failed, errs uint64
	var latency int64
	for _, s := range ws {
		cur := seen{at: now, completed: s.Completed, failed: s.Failed, errCount: errorCount(s), latencyNS: int64(s.LatencySum)}
		p.Inflight += s.Inflight
		old, ok := h.prev[s.Worker]
		h.prev[s.Worker] = cur
		if !ok && h.prevT.IsZero() {
			continue
		}
		if cur.completed < old.completed || cur.failed < old.failed || cur.errCount < old.errCount || cur.latencyNS < old.latencyNS {
			old = seen{} // restarted
		}
		completed += cur.completed - old.completed
		failed += cur.failed - old.failed
		errs += cur.errCount - old.errCount
		latency += cur.latencyNS - old.latencyNS
	}
	if dt := now.Sub(h.prevT).Seconds(); !h.prevT.IsZero() && dt > 0 {
		p.Throughput, p.Errors = round3(float64(completed)/dt), round3(float64(errs)/dt)
	}
	if n := completed + failed; n > 0 {
		p.LatencyMS = round3(float64(latency) / float64(n) / float64(time.Millisecond))
	}
	h.prevT = now
	for id, s := range h.prev {
		if now.Sub(s.at) > forgetAfter {
			delete(h.prev, id)
		}
	}
	h.push(p)
	return p
}

// due reports whether a point is due at now: the first, or at least 90% of res after the last
// (samples come at a steady interval, give or take scheduling).
func (h *history) due(now time.Time, res time.Duration) bool {
	return h.prevT.IsZero() || now.Sub(h.prevT) >= res*9/10
}

func (h *history) push(p Point) {
	if len(h.points) < cap(h.points) {
		h.points = append(h.points, p)
		return
	}
	h.points[h.next] = p
	h.next = (h.next + 1) % len(h.points)
}

// since returns the points after t (Unix milliseconds), oldest first.
func (h *history) since(t int64) []Point {
	out := make([]Point, 0, len(h.points))
	for i := range h.points {
		p := h.points[(h.next+i)%len(h.points)]
		if p.T > t {
			out = append(out, p)
		}
	}
	return out
}

// round3 keeps three decimals: the charts need no more, and the page's first data answer
// carries every point.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
