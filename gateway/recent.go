package gateway

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Recent requests: the gateway remembers the last requests it answered, so the dashboard can
// show the slow and the failed ones with their trace ids (a trace id finds the request in an
// OTLP backend and in every process's logs). Only what the request's log line holds is kept:
// never a body, a header or a key.

// Sizes of the recent-requests memory.
const (
	recentKept   = 500 // requests whose durations the slowest are chosen from
	recentSlow   = 10  // slowest shown
	recentFailed = 20  // failures shown
)

// RecentRequest is one answered request, as its log line has it.
type RecentRequest struct {
	Time       time.Time `json:"time"`
	RequestID  string    `json:"request_id"`
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	Status     int       `json:"status"`
	Code       string    `json:"code"`
	DurationMS float64   `json:"duration_ms"`
	Key        string    `json:"key,omitempty"` // the key's name
	Error      string    `json:"error,omitempty"`
	TraceID    string    `json:"trace_id,omitempty"`
}

// Recent is the slowest of the last requests and the last failures, newest first.
type Recent struct {
	Slow   []RecentRequest `json:"slow"`
	Failed []RecentRequest `json:"failed"`
}

// recentLog is the gateway's memory of its last requests: two rings.
type recentLog struct {
	mu     sync.Mutex
	all    []RecentRequest // the last recentKept, in a ring
	next   int
	failed []RecentRequest // the last recentFailed failures, in a ring
	nextF  int
}

// remembered reports whether requests to path are remembered: the APIs, not health probes or
// the dashboard's polls.
func remembered(path string) bool {
	return strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/backend-api/") || strings.HasPrefix(path, "/api/")
}

// add remembers r; a status of 400 or more is a failure.
func (l *recentLog) add(r RecentRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all, l.next = put(l.all, l.next, recentKept, r)
	if r.Status >= 400 {
		l.failed, l.nextF = put(l.failed, l.nextF, recentFailed, r)
	}
}

func put(ring []RecentRequest, next, size int, r RecentRequest) ([]RecentRequest, int) {
	if len(ring) < size {
		return append(ring, r), 0
	}
	ring[next] = r
	return ring, (next + 1) % size
}

// recent returns the slowest remembered requests and the failures, each newest first.
func (l *recentLog) recent() Recent {
	l.mu.Lock()
	all, failed := slices.Clone(l.all), slices.Clone(l.failed)
	l.mu.Unlock()
	slices.SortFunc(all, func(a, b RecentRequest) int { return cmp.Compare(b.DurationMS, a.DurationMS) })
	slow := all[:min(len(all), recentSlow)]
	newest := func(a, b RecentRequest) int { return b.Time.Compare(a.Time) }
	slices.SortFunc(slow, newest)
	slices.SortFunc(failed, newest)
	return Recent{Slow: slow, Failed: failed}
}

// remember records a request as its log line does.
func (g *Gateway) remember(c call, r *http.Request, o outcome, start time.Time, took time.Duration, span trace.Span) {
	rr := RecentRequest{Time: start, RequestID: c.id, Method: r.Method, Path: r.URL.Path, Status: o.status,
		Code: string(o.code), DurationMS: float64(took.Microseconds()) / 1000, Error: o.err}
	if c.key != nil {
		rr.Key = c.key.Name
	}
	if sc := span.SpanContext(); sc.IsValid() {
		rr.TraceID = sc.TraceID().String()
	}
	g.recent.add(rr)
}

// Recent returns the slowest of the gateway's last 500 requests (10) and its last 20 failed ones
// (status 400 or more), newest first, with their trace ids; the dashboard shows them.
func (g *Gateway) Recent() Recent { return g.recent.recent() }
