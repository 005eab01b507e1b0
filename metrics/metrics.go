// Package metrics exposes one worker process to Prometheus and to orchestrators: /metrics,
// /healthz (the process is up) and /readyz (connected to NATS, subscribed and not draining).
//
// Call New, pass the Metrics to worker.New as its Observer (worker.Options.Observer) so every
// generation is observed, call SetSources once the NATS service runs, and Start to serve it on an
// address.
//
// Most series are read at scrape time from the snapshots the pool already keeps (queue.Service
// Stats, the Codex clients' Stats, the gates' Snapshots, the accounts' state, the NATS
// connection's statistics), so they cannot drift from `nats micro stats`. Series without an
// account label sum over the worker's accounts (the gate's spacing is the widest); the
// codexpool_account_* series have one per account. Only what no snapshot holds — latency, time to the first
// upstream event and gate wait, as histograms — is observed per generation.
package metrics

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker"
)

// Namespace prefixes every series.
const Namespace = "codexpool"

// Sources are the snapshots read at every scrape. A nil field leaves its series out.
type Sources struct {
	Service  func() schemas.ServiceStats
	Upstream func() schemas.UpstreamStats
	Gate     func() gate.Snapshot
	// Accounts are the worker's accounts (worker.Worker.AccountStats), exported with an account
	// label.
	Accounts func() []worker.AccountStats
	NATS     NATSConn
	// Ready reports whether the worker takes requests: connected, subscribed, not draining.
	// Nil means not ready.
	Ready func() bool
}

// NATSConn is what the collector reads of the worker's NATS connection; *nats.Conn has it.
type NATSConn interface {
	Stats() nats.Statistics
	IsConnected() bool
}

// Metrics is a worker's private Prometheus registry and health state. Safe for concurrent use;
// a nil *Metrics ignores observations.
type Metrics struct {
	reg        *prometheus.Registry
	duration   *prometheus.HistogramVec
	firstEvent prometheus.Histogram
	gateWait   prometheus.Histogram
	kvWrite    prometheus.Histogram
	src        atomic.Pointer[Sources]
}

// New returns Metrics with the Go runtime and process collectors and the codexpool series.
// worker and version label the codexpool_worker_info series.
func New(worker, version string) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "generation_duration_seconds",
			Help:    "Time a generation took in the worker, from taking it to its last event or error, by outcome (ok, error).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"outcome"}),
		firstEvent: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "first_event_seconds",
			Help:    "Time from taking a generation to its first upstream event (gate, upgrade and origin time to first event).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		gateWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "gate_wait_seconds",
			Help:    "Time a completed generation that opened a new socket waited in the connect gate (and any 403 cooldown); gate_waited_seconds_total counts every wait.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
	}
	m.kvWrite = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "jobs_result_write_seconds",
		Help:    "Time a durable job's result took to write to the results bucket (before the ack).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.duration, m.firstEvent, m.gateWait, m.kvWrite,
		newSnapshots(m, worker, version),
	)
	for _, o := range []string{"ok", "error"} {
		m.duration.WithLabelValues(o) // export zero series so rate() works from the first scrape
	}
	return m
}

// Registry returns the private registry (to add collectors or gather in tests).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetSources sets (or replaces) what scrapes and /readyz read.
func (m *Metrics) SetSources(s Sources) { m.src.Store(&s) }

func (m *Metrics) sources() Sources {
	if s := m.src.Load(); s != nil {
		return *s
	}
	return Sources{}
}

// ObserveGeneration records one generation; it makes *Metrics a worker.Observer.
func (m *Metrics) ObserveGeneration(g worker.Generation) {
	if m == nil {
		return
	}
	outcome := "ok"
	if !g.OK {
		outcome = "error"
	}
	m.duration.WithLabelValues(outcome).Observe(g.Duration.Seconds())
	if g.FirstEvent > 0 {
		m.firstEvent.Observe(g.FirstEvent.Seconds())
	}
	if g.Dialed {
		m.gateWait.Observe(g.GateWait.Seconds())
	}
}

// ObserveResultWrite records the time one job result took to write to KV.
func (m *Metrics) ObserveResultWrite(d time.Duration) {
	if m == nil {
		return
	}
	m.kvWrite.Observe(d.Seconds())
}

// Ready reports what /readyz answers.
func (m *Metrics) Ready() bool {
	r := m.sources().Ready
	return r != nil && r()
}

// Handler serves /metrics, /healthz and /readyz.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !m.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}
