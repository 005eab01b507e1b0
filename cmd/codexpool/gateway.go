package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/gateway/anthropic"
	"github.com/codexpool/codexpool/gateway/dashboard"
	"github.com/codexpool/codexpool/internal/config"
	"github.com/codexpool/codexpool/internal/tracing/export"
	usagestore "github.com/codexpool/codexpool/internal/usage"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

const gatewayTrailer = `Serves the OpenAI and Anthropic APIs over HTTP in front of the pool, so the OpenAI SDKs, the
Codex CLI (as a custom model provider), chat-completions tools and Claude Code use it unchanged:
POST /v1/responses (JSON, or server-sent events with "stream": true; "background": true makes a
durable job), GET /v1/responses/{id}, POST /v1/chat/completions, POST /v1/messages,
POST /v1/messages/count_tokens, GET /v1/models, GET /healthz, GET /readyz, and a live operator
page, GET /dashboard (docs/dashboard.md). Clients send Authorization: Bearer <key> (or x-api-key
on /v1/messages) with one of CODEXPOOL_GATEWAY_KEYS, of the keys file, or of the JetStream
bucket CODEXPOOL_KEYS (codexpool keys add|set|revoke: applied within 1 s, no restart); without
keys the gateway listens on loopback only. It keeps no state: run as many as you like behind a load balancer. With no
CODEXPOOL_NATS_URL it connects to nats://127.0.0.1:4222 (a worker's embedded server; the
gateway never starts one itself).

Settings: the file key (in --config FILE or $CODEXPOOL_CONFIG), overridden by the variable:
`

// gatewayConfig is `codexpool gateway`'s configuration.
type gatewayConfig struct {
	PoolConfig
	Gateway `yaml:"gateway"`
	Log     `yaml:"log"`
	Otel    `yaml:"otel"`
}

// Gateway is the gateway section.
type Gateway struct {
	Addr           string        `envconfig:"GATEWAY_ADDR" yaml:"addr"`
	Keys           string        `envconfig:"GATEWAY_KEYS" yaml:"keys" secret:"true"`
	KeysFile       string        `envconfig:"GATEWAY_KEYS_FILE" yaml:"keys_file"`
	Usage          bool          `envconfig:"GATEWAY_USAGE" yaml:"usage"`
	Models         string        `envconfig:"GATEWAY_MODELS" yaml:"models"`
	ModelMap       string        `envconfig:"GATEWAY_MODEL_MAP" yaml:"model_map"`
	MaxBodyBytes   int64         `envconfig:"GATEWAY_MAX_BODY_BYTES" yaml:"max_body_bytes"`
	KeepAlive      time.Duration `envconfig:"GATEWAY_KEEPALIVE" yaml:"keepalive"`
	RequestTimeout time.Duration `envconfig:"GATEWAY_REQUEST_TIMEOUT" yaml:"request_timeout"`
	WriteTimeout   time.Duration `envconfig:"GATEWAY_WRITE_TIMEOUT" yaml:"write_timeout"`
	Unavailable    time.Duration `envconfig:"GATEWAY_UNAVAILABLE_WAIT" yaml:"unavailable_wait"`
	ShutdownGrace  time.Duration `envconfig:"SHUTDOWN_GRACE" yaml:"shutdown_grace"`
}

// defaultGatewayConfig returns the documented defaults of `codexpool gateway`.
func defaultGatewayConfig() gatewayConfig {
	return gatewayConfig{
		PoolConfig: defaultPoolConfig(),
		Gateway: Gateway{Addr: "127.0.0.1:8080", Models: gateway.DefaultModel, Usage: true,
			KeepAlive: gateway.DefaultKeepAlive, RequestTimeout: gateway.DefaultRequestTimeout,
			WriteTimeout: gateway.DefaultWriteTimeout, Unavailable: gateway.DefaultUnavailableWait,
			ShutdownGrace: defaultShutdownGrace},
		Log:  defaultLog(),
		Otel: defaultOtel(),
	}
}

func gatewaySettingError(name, format string, args ...any) error {
	return fieldError("gateway", name, format, args...)
}

// loadGatewayConfig reads the gateway's settings (defaults, then the file at path, then the
// environment) and checks them and its client keys.
func loadGatewayConfig(getenv func(string) string, path string) (gatewayConfig, []string, error) {
	c, st, err := loadGatewaySettings(getenv, path)
	if err != nil {
		return c, nil, err
	}
	keys, err := c.check()
	return c, keys, st.Explain(err)
}

// loadGatewaySettings reads the gateway's settings without checking them.
func loadGatewaySettings(getenv func(string) string, path string) (gatewayConfig, config.Settings, error) {
	c := defaultGatewayConfig()
	st, err := loader(getenv).Load(&c, path)
	if err != nil {
		return c, st, fmt.Errorf("gateway: %w", err)
	}
	return c, st, nil
}

// check validates the settings and returns the client keys.
func (c gatewayConfig) check() ([]string, error) {
	bad := gatewaySettingError
	switch {
	case c.Subject == "" || strings.ContainsAny(c.Subject, " \t\r\n"):
		return nil, bad("SUBJECT", "must be a NATS subject, got %q", c.Subject)
	case c.MaxBodyBytes < 0:
		return nil, bad("GATEWAY_MAX_BODY_BYTES", "must be >= 0, got %d", c.MaxBodyBytes)
	case c.KeepAlive <= 0:
		return nil, bad("GATEWAY_KEEPALIVE", "must be positive, got %s", c.KeepAlive)
	case c.RequestTimeout <= 0:
		return nil, bad("GATEWAY_REQUEST_TIMEOUT", "must be positive, got %s", c.RequestTimeout)
	case c.ShutdownGrace < 0:
		return nil, bad("SHUTDOWN_GRACE", "must be >= 0, got %s", c.ShutdownGrace)
	case len(c.models()) == 0:
		return nil, bad("GATEWAY_MODELS", "must name at least one model")
	}
	if _, err := anthropic.ParseModelMap(c.ModelMap); err != nil {
		return nil, bad("GATEWAY_MODEL_MAP", "%v", err)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return nil, bad("GATEWAY_ADDR", "must be host:port, e.g. 127.0.0.1:8080, got %q", c.Addr)
	}
	if err := validateLog("gateway", c.LogLevel, c.LogFormat); err != nil {
		return nil, err
	}
	if err := c.Otel.validate("gateway"); err != nil {
		return nil, err
	}
	keys, err := parseKeys(c.Keys)
	if err != nil {
		return nil, bad("GATEWAY_KEYS", "%v", err)
	}
	fileKeys, err := c.clientKeys()
	if err != nil {
		return nil, err
	}
	if err := gateway.CheckAddr(c.Addr, keys); errors.Is(err, gateway.ErrOpenWithoutKeys) && len(fileKeys) == 0 {
		return nil, fmt.Errorf("gateway: %s_GATEWAY_ADDR=%s is not a loopback address and %s_GATEWAY_KEYS is empty: "+
			"set client keys to listen beyond this machine, or listen on 127.0.0.1", envPrefix, c.Addr, envPrefix)
	} else if err != nil && !errors.Is(err, gateway.ErrOpenWithoutKeys) {
		return nil, bad("GATEWAY_ADDR", "%v", err)
	}
	return keys, nil
}

// clientKeys reads GATEWAY_KEYS_FILE; none when it is not set.
func (c gatewayConfig) clientKeys() ([]gateway.Key, error) {
	if c.KeysFile == "" {
		return nil, nil
	}
	return gateway.LoadKeys(c.KeysFile)
}

func (c gatewayConfig) models() []string {
	var out []string
	for _, m := range strings.Split(c.Models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// parseKeys reads the keys setting: a comma-separated list, or "@path" naming a file with one
// key per line (blank lines and lines starting with # skipped). Errors never quote a key.
func parseKeys(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	text := s
	sep := ","
	if path, isFile := strings.CutPrefix(s, "@"); isFile {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read keys file: %w", err)
		}
		text, sep = string(b), "\n"
	}
	var keys []string
	for i, k := range strings.Split(text, sep) {
		k = strings.TrimSpace(k)
		if k == "" || (sep == "\n" && strings.HasPrefix(k, "#")) {
			continue
		}
		if strings.ContainsAny(k, " \t\r\n,") {
			return nil, fmt.Errorf("key %d contains a space or comma", i+1)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("is set but holds no key")
	}
	return keys, nil
}

func runGateway(ctx context.Context, e env, args []string) error {
	defaults := defaultGatewayConfig()
	fs, err := parseServerFlags(e, "gateway", gatewayTrailer, &defaults, args)
	if err != nil {
		return err
	}
	cfg, keys, err := loadGatewayConfig(e.getenv, fs.configPath(e))
	if err != nil {
		return err
	}
	m, err := newGatewayMain(e, cfg, keys)
	if err != nil {
		return err
	}
	if err := m.Run(ctx); err != nil {
		return err
	}
	select {
	case err := <-m.served:
		m.undo()
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	m.Close()
	return nil
}

// gatewayMain is one `codexpool gateway` process. Run connects to NATS, listens and serves, each
// step returning its undo; Close holds the shutdown order.
type gatewayMain struct {
	cfg        gatewayConfig
	keys       []string
	clientKeys []gateway.Key     // the keys file's
	liveKeys   *gateway.LiveKeys // the keys bucket's; nil without JetStream
	usage      *usagestore.Store // nil: accounting off
	quota      *gateway.QuotaPoller
	log        *slog.Logger
	getenv     func(string) string

	tp     *export.Provider // the spans' exporter; off without otel.endpoint
	nc     *nats.Conn
	ln     net.Listener
	srv    *http.Server
	served chan error // Serve's result
	undos  []func()   // of the steps done, in start order
}

func newGatewayMain(e env, cfg gatewayConfig, keys []string) (*gatewayMain, error) {
	log, err := newLogger(e.stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return nil, err
	}
	if err := checkEnviron(e, "gateway", e.getenv(envPrefix+"_ACCOUNTS"), func(msg string) { log.Warn(msg) }); err != nil {
		return nil, err
	}
	if _, err := cfg.security().Options(); err != nil { // the security files, checked before anything starts
		return nil, err
	}
	clientKeys, err := cfg.clientKeys()
	if err != nil {
		return nil, err
	}
	return &gatewayMain{cfg: cfg, keys: keys, clientKeys: clientKeys, log: log, getenv: e.getenv, served: make(chan error, 1)}, nil
}

// Run starts the gateway; it serves when Run returns nil, until Close or until Serve fails
// (served).
func (m *gatewayMain) Run(ctx context.Context) error {
	for _, step := range []func(context.Context) (func(), error){m.startTracing, m.connect, m.watchKeys, m.openUsage, m.pollQuota, m.listen, m.serve} {
		undo, err := step(ctx)
		if err != nil {
			m.undo()
			return err
		}
		if undo != nil {
			m.undos = append(m.undos, undo)
		}
	}
	return nil
}

// Close stops a serving gateway: stop accepting and let requests in progress finish within the
// grace period, then close what is left (which cancels those pool requests); flush NATS so the
// cancellations go out; then undo the start steps.
func (m *gatewayMain) Close() {
	m.log.Info("shutting down: no new connections, finishing requests in progress", "grace", m.cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownGrace)
	err := m.srv.Shutdown(sctx)
	cancel()
	if err != nil {
		// Closing the connections ends the requests' contexts, which cancels their pool requests.
		m.log.Warn("shutdown grace over; closing the remaining connections", "error", err)
		_ = m.srv.Close()
	}
	if err := <-m.served; !errors.Is(err, http.ErrServerClosed) {
		m.log.Warn("serve", "error", err)
	}
	// Cancellations of the requests just cut off go out before the connection closes.
	if err := m.nc.FlushTimeout(time.Second); err != nil {
		m.log.Warn("NATS flush", "error", err)
	}
	m.log.Info("stopped")
	m.undo()
}

// undo undoes the start steps done, last first.
func (m *gatewayMain) undo() {
	for i := len(m.undos) - 1; i >= 0; i-- {
		m.undos[i]()
	}
	m.undos = nil
}

// connect connects to CODEXPOOL_NATS_URL, else to a worker's embedded server on this machine.
func (m *gatewayMain) connect(ctx context.Context) (func(), error) {
	url := m.cfg.NATSURL
	if url == "" {
		url = nats.DefaultURL
	}
	opts, err := m.cfg.natsOptions(m.getenv, url)
	if err != nil {
		return nil, err
	}
	nc, err := queue.Connect(ctx, url, "codexpool gateway", m.log, opts...)
	if err != nil {
		return nil, err
	}
	m.nc = nc
	return nc.Close, nil
}

// startTracing starts the OTLP exporter when otel.endpoint is set; its undo, run last, flushes.
func (m *gatewayMain) startTracing(context.Context) (func(), error) {
	tp, flush, err := startTracing(m.cfg.Otel, "gateway", "gateway-"+m.cfg.Addr, m.log)
	m.tp = tp
	return flush, err
}

func (m *gatewayMain) listen(context.Context) (func(), error) {
	ln, err := net.Listen("tcp", m.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("gateway: listen on %s (%s_GATEWAY_ADDR): %w", m.cfg.Addr, envPrefix, err)
	}
	m.ln = ln
	return nil, nil // the server closes it
}

// serve starts the HTTP server on the listener; its result arrives on served.
func (m *gatewayMain) serve(context.Context) (func(), error) {
	cfg := m.cfg
	cl := client.New(m.nc, client.Options{Subject: cfg.Subject, Timeout: cfg.RequestTimeout,
		CancelSubject: cfg.CancelSubject, JobsSubject: cfg.JobsSubject, ResultsBucket: cfg.ResultsBucket})
	var jobs gateway.Jobs
	if on, _ := m.nc.ConnectedServerJetStream(); on {
		jobs = gatewayJobs{cl}
	}
	modelMap, _ := anthropic.ParseModelMap(cfg.ModelMap) // vetted by check
	var g *gateway.Gateway
	dash := dashboard.New(m.nc, dashboard.Config{JobsStream: cfg.JobsStream, Logger: m.log, Usage: dashboardUsage(m.usage),
		Recent: func() any { return g.Recent() }})
	g = gateway.New(cl, m.nc, gateway.Config{
		Dashboard:       dash,
		Jobs:            jobs,
		Keys:            m.keys,
		ClientKeys:      m.clientKeys,
		LiveKeys:        m.liveKeys,
		Meter:           m.meter(),
		Quota:           m.quota,
		Models:          cfg.models(),
		ModelMap:        modelMap,
		MaxBodyBytes:    cfg.MaxBodyBytes,
		KeepAlive:       cfg.KeepAlive,
		RequestTimeout:  cfg.RequestTimeout,
		WriteTimeout:    cfg.WriteTimeout,
		UnavailableWait: cfg.Unavailable,
		Logger:          m.log,
		TracerProvider:  m.tp,
	})
	m.srv = gateway.NewServer(g)
	m.srv.ErrorLog = slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)
	go func() { m.served <- m.srv.Serve(m.ln) }()
	m.log.Info("gateway listening", "addr", m.ln.Addr().String(), "nats", m.nc.ConnectedUrlRedacted(), "subject", cfg.Subject,
		"auth", len(m.keys)+len(m.clientKeys)+m.liveKeyCount() > 0, "keys", len(m.keys)+len(m.clientKeys), "bucket_keys", m.liveKeyCount(),
		"usage", m.usage != nil, "models", cfg.models())
	return runDashboard(dash), nil
}

// dashboardUsageEvery is how often the dashboard's usage panel asks the usage stream again: a
// query reads the last day's records, too much work for every sample.
const dashboardUsageEvery = 10 * time.Second

// dashboardUsage feeds the dashboard's usage panel: each key's totals over the last 24 hours,
// asked of st at most every dashboardUsageEvery. nil when accounting is off.
func dashboardUsage(st *usagestore.Store) func(context.Context) (any, error) {
	if st == nil {
		return nil
	}
	var (
		mu    sync.Mutex
		asked time.Time
		rows  []usageRow
		err   error
	)
	return func(ctx context.Context) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		if !asked.IsZero() && time.Since(asked) < dashboardUsageEvery {
			return rows, err
		}
		var rep usagestore.Report
		rep, err = st.Query(ctx, time.Now().Add(-24*time.Hour), usagestore.ByKey)
		asked, rows = time.Now(), make([]usageRow, 0, len(rep.Rows))
		for _, r := range rep.Rows {
			rows = append(rows, usageRow{Key: r.Name, Totals: r.Totals})
		}
		return rows, err
	}
}

// usageRow is one line of the dashboard's usage table: a key's totals.
type usageRow struct {
	Key string `json:"key (24 h)"`
	usagestore.Totals
}

// runDashboard samples the fleet for the dashboard until the returned stop, which waits for it.
func runDashboard(d *dashboard.Dashboard) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// gatewayJobs serves the gateway's "background": true with the pool's durable jobs: the job id
// is the request's Codex-Request-Id, so GET /v1/responses/{id} finds it.
type gatewayJobs struct{ cl *client.Client }

func (j gatewayJobs) Submit(ctx context.Context, body []byte, hdr nats.Header) (string, error) {
	id := hdr.Get(schemas.HeaderRequestID)
	job, err := j.cl.Submit(ctx, body, client.SubmitOptions{ID: id, RequestID: id, Header: hdr})
	return job.ID, err
}

// Result reads the stored result. A job without one is still queued or running, if the gateway
// made its id ("gw-" and a UUID: the store cannot tell a pending job from an id never submitted);
// any other id without a result is unknown.
func (j gatewayJobs) Result(ctx context.Context, id string) ([]byte, bool, error) {
	body, err := j.cl.ResultBody(ctx, id)
	switch {
	case errors.Is(err, client.ErrNoResult) && gatewayJobID(id):
		return nil, false, nil
	case errors.Is(err, client.ErrNoResult):
		return nil, false, fmt.Errorf("%w: %s", gateway.ErrJobNotFound, id)
	}
	return body, err == nil, err
}

// gatewayJobID reports whether id has the form of the gateway's request ids.
func gatewayJobID(id string) bool {
	rest, ok := strings.CutPrefix(id, "gw-")
	return ok && uuid.Validate(rest) == nil
}

// openUsage opens the usage store when GATEWAY_USAGE is on and the server has JetStream. A keys
// file with limits needs it: without JetStream they could not hold across gateways.
func (m *gatewayMain) openUsage(ctx context.Context) (func(), error) {
	limited := slices.ContainsFunc(m.clientKeys, func(k gateway.Key) bool { return k.Limits != (gateway.Limits{}) })
	on, _ := m.nc.ConnectedServerJetStream()
	switch {
	case !m.cfg.Usage && limited:
		return nil, fmt.Errorf("gateway: %s_GATEWAY_KEYS_FILE sets limits, which need %s_GATEWAY_USAGE=true", envPrefix, envPrefix)
	case !m.cfg.Usage:
		return nil, nil
	case !on && limited:
		return nil, fmt.Errorf("gateway: %s_GATEWAY_KEYS_FILE sets limits, which need JetStream on the NATS server (it has none)", envPrefix)
	case !on:
		m.log.Warn("usage accounting off: the NATS server has no JetStream")
		return nil, nil
	}
	js, err := jetstream.New(m.nc)
	if err != nil {
		return nil, fmt.Errorf("gateway: usage: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := usagestore.Open(sctx, js, usagestore.Config{})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	m.usage = st
	return func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := st.Close(cctx); err != nil {
			m.log.Warn("usage records", "error", err)
		}
	}, nil
}

// watchKeys reads and watches the keys bucket (CODEXPOOL_KEYS, `codexpool keys`) when the server
// has JetStream, so a key added, changed or revoked there applies at once. A gateway that cannot
// read it (no JetStream, or a NATS user without the gateway role's rights to it) serves with its
// configured keys and says so.
func (m *gatewayMain) watchKeys(ctx context.Context) (func(), error) {
	if on, _ := m.nc.ConnectedServerJetStream(); !on {
		m.log.Info("keys bucket off: the NATS server has no JetStream; keys come from the settings only")
		return nil, nil
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	js, err := jetstream.New(m.nc)
	if err != nil {
		return nil, fmt.Errorf("gateway: keys bucket: %w", err)
	}
	kv, err := gateway.OpenKeysBucket(sctx, js)
	var live *gateway.LiveKeys
	if err == nil {
		live, err = gateway.WatchKeys(sctx, m.nc, kv, m.log)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m.log.Warn("keys bucket not read: keys come from the settings only (grant the gateway role's rights to "+gateway.KeysBucket+")",
			"bucket", gateway.KeysBucket, "error", err)
		return nil, nil
	}
	m.liveKeys = live
	if live.Limited() && !m.cfg.Usage {
		m.log.Warn("keys of the bucket set limits, which need " + envPrefix + "_GATEWAY_USAGE=true: they are not enforced")
	}
	return live.Stop, nil
}

func (m *gatewayMain) liveKeyCount() int {
	if m.liveKeys == nil {
		return 0
	}
	return m.liveKeys.Len()
}

// meter is the gateway's Meter: the usage store, or nil when accounting is off.
func (m *gatewayMain) meter() gateway.Meter {
	if m.usage == nil {
		return nil
	}
	return m.usage
}

// pollQuota keeps the pool's quota (the workers' account windows) for the x-codex-* headers and
// the usage routes, asking every 5 s; the undo stops it and waits for it.
func (m *gatewayMain) pollQuota(context.Context) (func(), error) {
	m.quota = gateway.NewQuotaPoller(m.nc, gateway.DefaultQuotaEvery)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.quota.Run(ctx) }()
	return func() { cancel(); <-done }, nil
}
