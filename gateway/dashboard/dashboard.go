package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// Defaults of Config.
const (
	DefaultInterval   = 500 * time.Millisecond
	DefaultResolution = time.Second
	DefaultHistory    = 15 * time.Minute
	DefaultStatsWait  = 200 * time.Millisecond
	DefaultJobsStream = "CODEXPOOL_JOBS"
)

// Config configures a Dashboard. The zero value of every field is its documented default.
type Config struct {
	// Interval is the time between samples of the fleet; default 500ms.
	Interval time.Duration
	// Resolution is the time between two points of the charts (a sample adds one when at least
	// 90% of it has passed since the last); default 1s.
	Resolution time.Duration
	// History is how far back the charts go; default 15m (History/Resolution points are kept).
	History time.Duration
	// StatsWait is how long a sample waits for the workers' STATS replies; default 200ms.
	StatsWait time.Duration
	// JobsStream is the jobs' JetStream stream; default "CODEXPOOL_JOBS".
	JobsStream string
	// Usage, when set, feeds the page's usage panel: called at each sample (its context ends
	// after Interval), its result is shown JSON-encoded (a list of objects as a table), its
	// error as a problem. Nil: the panel says that usage accounting is not enabled.
	Usage func(ctx context.Context) (any, error)
	// Recent, when set, feeds the page's recent-requests panel at each sample: the gateway's
	// slow and failed requests ({"slow": [...], "failed": [...]}, each with its trace id). Nil:
	// the panel is empty.
	Recent func() any
	// Logger gets sampling problems at debug; default discard.
	Logger *slog.Logger
}

//go:embed assets
var assets embed.FS

// Dashboard samples the fleet and serves the page. Make one with New; it is safe for
// concurrent use.
type Dashboard struct {
	nc     *nats.Conn
	cfg    Config
	log    *slog.Logger
	static http.Handler
	page   []byte // index.html

	mu     sync.Mutex
	latest Data
	hist   *history
}

// New returns a Dashboard that reads the fleet over nc. It shows nothing until Run's first sample.
func New(nc *nats.Conn, cfg Config) *Dashboard {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Resolution <= 0 {
		cfg.Resolution = DefaultResolution
	}
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	if cfg.StatsWait <= 0 {
		cfg.StatsWait = DefaultStatsWait
	}
	if cfg.JobsStream == "" {
		cfg.JobsStream = DefaultJobsStream
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	sub, _ := fs.Sub(assets, "assets") // the directory is embedded: cannot fail
	page, _ := fs.ReadFile(sub, "index.html")
	n := max(int(cfg.History/cfg.Resolution), 1)
	return &Dashboard{nc: nc, cfg: cfg, log: cfg.Logger.With("component", "dashboard"),
		static: http.StripPrefix("/dashboard/", http.FileServerFS(sub)), page: page, hist: newHistory(n)}
}

// Run samples the fleet at once and then every Interval until ctx ends; it returns ctx.Err().
func (d *Dashboard) Run(ctx context.Context) error {
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		d.Sample(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sample takes one sample of the fleet now (Run calls it every Interval).
func (d *Dashboard) Sample(ctx context.Context) {
	data := Data{IntervalMS: d.cfg.Interval.Milliseconds(), ResolutionMS: d.cfg.Resolution.Milliseconds(), UsageOn: d.cfg.Usage != nil}
	replies, err := client.Stats(ctx, d.nc, d.cfg.StatsWait)
	if err != nil {
		data.Problems = append(data.Problems, err.Error())
	}
	ws := decodeWorkers(replies)
	data.Totals, data.Workers, data.Accounts, data.Gates = fleetView(ws)
	data.Jobs, data.JobsNote = d.jobs(ctx)
	if d.cfg.Usage != nil {
		uctx, cancel := context.WithTimeout(ctx, d.cfg.Interval)
		u, err := d.cfg.Usage(uctx)
		cancel()
		if err != nil {
			data.UsageError = err.Error()
		}
		data.Usage = u
	}
	if d.cfg.Recent != nil {
		data.Recent = d.cfg.Recent()
	}
	now := time.Now()
	data.Time = now
	for _, p := range data.Problems {
		d.log.Debug("sample", "problem", p)
	}
	d.mu.Lock()
	if d.hist.due(now, d.cfg.Resolution) {
		d.hist.add(now, ws)
	}
	d.latest = data
	d.mu.Unlock()
}

// jobs reads the jobs stream and its consumer; nil and why not when there are none.
func (d *Dashboard) jobs(ctx context.Context) (*Jobs, string) {
	if on, _ := d.nc.ConnectedServerJetStream(); !on {
		return nil, "the NATS server has no JetStream: durable jobs are off"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*d.cfg.StatsWait)
	defer cancel()
	js, err := jetstream.New(d.nc)
	if err != nil {
		return nil, err.Error()
	}
	st, err := js.Stream(ctx, d.cfg.JobsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, "no stream " + d.cfg.JobsStream + " yet: no worker with jobs has started"
	}
	if err != nil {
		return nil, fmt.Sprintf("stream %s: %v", d.cfg.JobsStream, err)
	}
	j := &Jobs{Stream: d.cfg.JobsStream, Stored: st.CachedInfo().State.Msgs}
	cons, err := st.Consumer(ctx, schemas.JobsConsumer)
	if err != nil {
		return j, fmt.Sprintf("consumer %s: %v", schemas.JobsConsumer, err)
	}
	ci := cons.CachedInfo()
	j.Pending, j.Running, j.Redelivered, j.Waiting = ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting
	return j, ""
}

// ServeHTTP serves the page (GET /dashboard), its data (GET /dashboard/data) and its script and
// style sheet. The caller checks who may see it.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "dashboard: GET only", http.StatusMethodNotAllowed)
		return
	}
	switch p := r.URL.Path; {
	case p == "/dashboard" || p == "/dashboard/":
		h.Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(d.page)
	case p == "/dashboard/data":
		d.serveData(w, r)
	case p == "/dashboard/index.html":
		http.Redirect(w, r, "/dashboard", http.StatusMovedPermanently)
	default:
		d.serveAsset(w, r)
	}
}

func (d *Dashboard) serveAsset(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
		http.NotFound(w, r)
		return
	}
	d.static.ServeHTTP(w, r)
}

func (d *Dashboard) serveData(w http.ResponseWriter, r *http.Request) {
	var since int64
	if s := r.URL.Query().Get("since"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			http.Error(w, "dashboard: since must be Unix milliseconds, got "+strconv.Quote(s), http.StatusBadRequest)
			return
		}
		since = v
	}
	d.mu.Lock()
	data := d.latest
	data.History = d.hist.since(since)
	b, err := json.Marshal(data)
	d.mu.Unlock()
	if err != nil { // a Usage result that does not encode
		data.Usage, data.UsageError = nil, "usage: "+err.Error()
		b, _ = json.Marshal(data)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
