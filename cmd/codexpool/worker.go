package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/internal/tracing/export"
	usagestore "github.com/codexpool/codexpool/internal/usage"
	"github.com/codexpool/codexpool/metrics"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codex/login"
)

const workerTrailer = `A worker joins the queue group on the request subject and runs each request it gets as a
generation over a WebSocket to the Codex origin. Start more processes, on more machines, to scale
out. With no CODEXPOOL_NATS_URL the worker embeds a NATS server that clients and other workers
can join; when CODEXPOOL_EMBEDDED_NATS_ADDR is taken by such a server of this user (another
plain worker), it joins that one instead.

Settings: the file key (in --config FILE or $CODEXPOOL_CONFIG), overridden by the variable:
`

func runWorker(ctx context.Context, e env, args []string) error {
	defaults := defaultWorkerConfig()
	fs, err := parseServerFlags(e, "worker", workerTrailer, &defaults, args)
	if err != nil {
		return err
	}
	cfg, _, err := loadWorkerConfig(e.getenv, fs.configPath(e))
	if err != nil {
		return err
	}
	m, err := newWorkerMain(e, cfg)
	if err != nil {
		return err
	}
	if err := m.Run(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	m.Close()
	return nil
}

// workerMain is one `codexpool worker` process: its configuration and what it started. Run starts
// it in named steps, each of which returns how to undo it; when a step fails, the steps done so
// far are undone in reverse and Run returns the error. Close holds the shutdown order.
type workerMain struct {
	cfg    workerConfig
	getenv func(string) string
	log    *slog.Logger
	url    string               // of the NATS server(s): CODEXPOOL_NATS_URL, else the embedded server's
	accts  []worker.Account     // from CODEXPOOL_ACCOUNTS; nil = the CODEXPOOL_CODEX_* account
	met    *metrics.Metrics     // nil without CODEXPOOL_METRICS_ADDR
	usage  *usagestore.Recorder // nil: no usage records (CODEXPOOL_USAGE off, or no JetStream)

	tp    *export.Provider // the spans' exporter; off without otel.endpoint
	nc    *nats.Conn
	w     *worker.Worker
	svc   *queue.Service
	undos []func() // of the steps done, in start order

	// serving is true from the subscription's start until shutdown begins (/readyz).
	serving atomic.Bool
}

// newWorkerMain checks what can be checked before anything starts: the logger, the NATS security
// files, the accounts file and, without one, that some credentials exist.
func newWorkerMain(e env, cfg workerConfig) (*workerMain, error) {
	log, err := newLogger(e.stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return nil, err
	}
	m := &workerMain{cfg: cfg, getenv: e.getenv, log: log, url: cfg.NATSURL}
	if err := checkEnviron(e, "worker", cfg.AccountsFile, func(msg string) { log.Warn(msg) }); err != nil {
		return nil, err
	}
	if _, err = cfg.security().Options(); err != nil { // the security files, checked before anything starts
		return nil, err
	}
	if cfg.MetricsAddr != "" {
		m.met = metrics.New(cfg.id(), getVersion())
	}
	if m.accts, err = cfg.accounts(e.getenv); err != nil {
		return nil, err
	}
	if m.accts != nil && (cfg.CodexToken != "" || cfg.CodexAccountID != "") {
		log.Warn("CODEXPOOL_CODEX_TOKEN and CODEXPOOL_CODEX_ACCOUNT_ID are ignored: CODEXPOOL_ACCOUNTS lists the accounts",
			"accounts_file", cfg.AccountsFile)
	}
	if err := m.loadCredentialsKey(); err != nil {
		return nil, err
	}
	// Fail before NATS when there are no credentials at all: a person is reading the error.
	if m.accts == nil {
		if _, err := login.ResolveCredentials(cfg.CodexToken, cfg.CodexAccountID, cfg.authFilePath()); errors.Is(err, login.ErrNoCredentials) {
			return nil, fmt.Errorf("%w (set CODEXPOOL_CODEX_TOKEN, CODEXPOOL_CODEX_AUTH_FILE to a Codex CLI login, or CODEXPOOL_ACCOUNTS)", err)
		} else if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// parseServerFlags parses the flags of a long-running subcommand (worker, gateway), which takes no
// arguments: its --help ends with the settings table of defaults.
func parseServerFlags(e env, name, trailer string, defaults any, args []string) (*flags, error) {
	var usageTable bytes.Buffer
	if err := printSettings(&usageTable, defaults); err != nil {
		return nil, err
	}
	fs := newFlags(e, name, name+" [--config FILE] [--help]", trailer+usageTable.String())
	if err := fs.parse(e, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		fs.printUsage(e.stderr)
		return nil, exitError{code: 2, msg: fmt.Sprintf("%s takes no arguments, got %q (configure it with CODEXPOOL_* variables or --config)", name, fs.Args())}
	}
	return fs, nil
}

// loadCredentialsKey resolves the key that seals the logins shared over NATS: the setting, else
// the key file, else — for a worker that embeds its NATS server, the quick start — a key of its
// own in the state directory, so that even there no token sits in the bucket in plaintext.
func (m *workerMain) loadCredentialsKey() error {
	path := m.cfg.CredentialsKeyFile
	switch {
	case m.cfg.CredentialsKey != "":
		return nil
	case path == "" && m.cfg.NATSURL != "":
		return nil // not shared; codex says so once
	case path == "":
		key, err := login.LoadOrCreateKeyFile(filepath.Join(stateDir(m.getenv), "credentials.key"))
		if err != nil {
			return fmt.Errorf("worker: credentials key: %w", err)
		}
		m.cfg.CredentialsKey = string(key)
	default:
		key, err := login.LoadKeyFile(path)
		if err != nil {
			return fmt.Errorf("worker: CODEXPOOL_CREDENTIALS_KEY_FILE: %w", err)
		}
		m.cfg.CredentialsKey = string(key)
	}
	return nil
}

// Run starts the worker; it serves when Run returns nil, until Close (call Close only then).
func (m *workerMain) Run(ctx context.Context) error {
	steps := []func(context.Context) (undo func(), err error){
		m.startTracing,  // the OTLP exporter, when otel.endpoint is set (undone last: it flushes)
		m.startMetrics,  // /metrics, /healthz, /readyz (not ready yet)
		m.startEmbedded, // the embedded NATS server, without CODEXPOOL_NATS_URL
		m.connect,       // the NATS connection
		m.startWorker,   // accounts, gates, the origin client
		m.startService,  // the micro service and the jobs consumer: requests arrive from here on
		m.linkGates,     // gate state shared with the gates of the same account
	}
	for _, step := range steps {
		undo, err := step(ctx)
		if err != nil {
			m.undo()
			return err
		}
		if undo != nil {
			m.undos = append(m.undos, undo)
		}
	}
	m.ready()
	return nil
}

// Close stops a running worker, in this order: stop taking work and finish what is in flight
// within the grace period; close the worker while NATS is still up (a token refresh in flight
// is finished and its answer shared with the pool: it may hold the only valid refresh token);
// drain NATS, which flushes every reply already published; then undo the start steps in reverse.
func (m *workerMain) Close() {
	m.serving.Store(false)
	m.log.Info("shutting down: no new requests, finishing in-flight", "grace", m.cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownGrace)
	err := m.svc.Shutdown(sctx)
	cancel()
	if err != nil {
		m.log.Warn("shutdown", "error", err)
	}
	_ = m.w.Close()
	m.closeUsage()
	m.drain()
	m.log.Info("stopped", "worker", m.w.ID())
	m.undo()
}

// undo undoes the start steps done, last first.
func (m *workerMain) undo() {
	for i := len(m.undos) - 1; i >= 0; i-- {
		m.undos[i]()
	}
	m.undos = nil
}

// drain drains the NATS connection, waiting up to 10 s for it to close. The closed handler
// queue.Connect installed (it logs the close) runs first.
func (m *workerMain) drain() {
	closed := make(chan struct{})
	logClosed := m.nc.ClosedHandler()
	m.nc.SetClosedHandler(func(nc *nats.Conn) {
		if logClosed != nil {
			logClosed(nc)
		}
		close(closed)
	})
	if err := m.nc.Drain(); err == nil {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			m.log.Warn("NATS drain did not finish in 10s; closing")
		}
	}
}

func (m *workerMain) startMetrics(context.Context) (func(), error) {
	if m.met == nil {
		return nil, nil
	}
	ms, err := metrics.Start(m.cfg.MetricsAddr, m.met, m.log)
	if err != nil {
		return nil, err
	}
	m.log.Info("metrics listening", "addr", ms.Addr(), "paths", "/metrics /healthz /readyz")
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ms.Shutdown(sctx)
	}, nil
}

// startEmbedded starts the embedded NATS server when no CODEXPOOL_NATS_URL is set. With
// CODEXPOOL_JOBS=auto and a JetStream store that cannot be used, it serves without jobs.
func (m *workerMain) startEmbedded(context.Context) (func(), error) {
	if m.url != "" {
		return nil, nil
	}
	// The embedded server admits only this user's codexpool commands: they read the credential
	// it requires from the state directory (0600).
	credPath := localAuthPath(m.getenv)
	if err := canListen(m.cfg.EmbeddedNATSAddr); err != nil {
		return nil, m.joinEmbedded(credPath, err)
	}
	auth, err := queue.LoadOrCreateLocalAuth(credPath)
	if err != nil {
		return nil, err
	}
	opts := []embedded.Option{queue.WithLocalAuth(auth)}
	if m.cfg.Jobs != "off" {
		opts = append(opts, embedded.WithJetStream(m.cfg.embeddedStore(m.getenv)))
	}
	ns, err := embedded.Start(m.cfg.EmbeddedNATSAddr, m.log, opts...)
	if err != nil && m.cfg.Jobs == "auto" && len(opts) > 1 {
		// The store is unusable (unwritable, another server's): serve requests without jobs.
		m.log.Warn("durable jobs off: the embedded server's JetStream store cannot be used", "store", m.cfg.embeddedStore(m.getenv), "error", err)
		m.cfg.Jobs = "off"
		ns, err = embedded.Start(m.cfg.EmbeddedNATSAddr, m.log, opts[0])
	}
	if err != nil {
		return nil, err
	}
	m.url = ns.ClientURL()
	m.log.Info("embedded NATS server started", "url", m.url, "jetstream", m.cfg.Jobs != "off",
		"user", auth.User, "password_file", credPath)
	return func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}, nil
}

// canListen returns why nothing can listen on addr, or nil when something can.
func canListen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// joinEmbedded joins the NATS server that holds the embedded server's address — most likely the
// embedded server of another worker of this user — when it admits this user's local credential:
// the worker then serves through it. Otherwise the error says what to set, at once.
func (m *workerMain) joinEmbedded(credPath string, listenErr error) error {
	url := "nats://" + loopbackAddr(m.cfg.EmbeddedNATSAddr)
	auth, err := queue.ReadLocalAuth(credPath)
	if err == nil {
		var nc *nats.Conn
		nc, err = nats.Connect(url, nats.UserInfo(auth.User, auth.Password), nats.Timeout(2*time.Second),
			nats.NoReconnect(), nats.Name("codexpool worker "+m.cfg.id()))
		if err == nil {
			nc.Close()
			m.url = url // on loopback, connect presents the credential on its own
			if host, _, _ := net.SplitHostPort(loopbackAddr(m.cfg.EmbeddedNATSAddr)); !isLoopback(host) {
				m.url = auth.URL(url)
			}
			m.log.Info("joined the embedded NATS server at "+url+" (another worker's: it serves as long as that one runs)",
				"url", url, "password_file", credPath)
			return nil
		}
	}
	return fmt.Errorf("worker: cannot embed a NATS server on %s (%s_EMBEDDED_NATS_ADDR): %w; nor join the server there "+
		"with this user's credential (%v). Set %s_NATS_URL to the NATS server to join (with its credentials), "+
		"or %s_EMBEDDED_NATS_ADDR to a free address to embed another", m.cfg.EmbeddedNATSAddr, envPrefix, listenErr, err,
		envPrefix, envPrefix)
}

// loopbackAddr is where to dial a server listening on addr: an unspecified host (0.0.0.0, ::, none)
// is this machine's loopback.
func loopbackAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// isLoopback reports whether host is this machine's loopback.
func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

func (m *workerMain) connect(ctx context.Context) (func(), error) {
	if sec := m.cfg.security(); sec.Kind() != "none" || sec.TLS() {
		m.log.Info("NATS security", "auth", sec.Kind(), "tls", sec.TLS(), "client_cert", sec.TLSCert != "")
	}
	opts, err := m.cfg.natsOptions(m.getenv, m.url)
	if err != nil {
		return nil, err
	}
	nc, err := queue.Connect(ctx, m.url, "codexpool worker "+m.cfg.id(), m.log, opts...)
	if err != nil {
		return nil, err
	}
	m.nc = nc
	return nc.Close, nil
}

func (m *workerMain) startWorker(ctx context.Context) (func(), error) {
	var obs worker.Observer
	if m.met != nil {
		obs = m.met
	}
	if m.usage = usageRecorder(ctx, m.nc, m.cfg, m.log); m.usage != nil {
		obs = usageObserver{next: obs, rec: m.usage}
	}
	slots, closeSlots := leaseStore(ctx, m.nc, m.cfg, m.accts, m.log)
	w, err := worker.New(m.cfg.worker(m.accts), worker.Options{Logger: m.log, Version: getVersion(), Observer: obs,
		Coordinator: credentialStore(ctx, m.nc, m.cfg, m.log), Bindings: stickyStore(ctx, m.nc, m.cfg, m.log), Slots: slots})
	if err != nil {
		closeSlots()
		return nil, err
	}
	m.w = w
	return func() { _ = w.Close(); closeSlots() }, nil
}

// startService subscribes: from here on requests arrive. A failure later in the start closes the
// connection, which ends the subscriptions.
func (m *workerMain) startTracing(context.Context) (func(), error) {
	tp, flush, err := startTracing(m.cfg.Otel, "worker", m.cfg.id(), m.log)
	m.tp = tp
	return flush, err
}

func (m *workerMain) startService(ctx context.Context) (func(), error) {
	qcfg := m.cfg.queue()
	qcfg.Logger = m.log
	qcfg.WorkerStats = m.w.StatsData
	qcfg.TracerProvider = m.tp
	jc, err := jobsFor(ctx, m.cfg, m.nc, m.log)
	if err != nil {
		return nil, err
	}
	if jc != nil {
		if qcfg.Jobs, err = queue.OpenJobs(ctx, m.nc, *jc, m.log); err != nil {
			return nil, err
		}
	}
	if m.met != nil {
		qcfg.ObserveResultWrite = m.met.ObserveResultWrite
	}
	if m.svc, err = queue.NewService(m.nc, qcfg, m.w); err != nil {
		return nil, err
	}
	return nil, nil
}

// linkGates links each account's adaptive gate with the gates of the same account and scope.
func (m *workerMain) linkGates(context.Context) (func(), error) {
	var links []*queue.GateLink
	closeAll := func() {
		for i := len(links) - 1; i >= 0; i-- {
			links[i].Close()
		}
	}
	for _, a := range m.w.Accounts() {
		subject, ok := queue.GateScopeSubject(m.cfg.GateScope, a.Identity)
		if !ok || a.Gate.Snapshot().Mode != gate.Adaptive {
			continue
		}
		link, err := queue.LinkGate(m.nc, subject, a.Gate, 0, m.log)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("worker: gate state of account %s: %w", a.Name, err)
		}
		links = append(links, link)
		m.log.Info("gate shares state", "account", a.Name, "scope", m.cfg.GateScope, "subject", link.Stats().Subject)
	}
	return closeAll, nil
}

// ready marks the worker ready (/readyz) and logs that it serves.
func (m *workerMain) ready() {
	m.serving.Store(true)
	if m.met != nil {
		svc, nc := m.svc, m.nc
		m.met.SetSources(metrics.Sources{
			Service:  svc.Stats,
			Upstream: m.w.UpstreamStats,
			Gate:     m.w.GateSnapshot,
			Accounts: m.w.AccountStats,
			NATS:     nc,
			Ready: func() bool {
				return m.serving.Load() && nc.IsConnected() && !svc.Stats().Draining
			},
		})
	}
	m.log.Info("serving", "worker", m.w.ID(), "subject", m.cfg.Subject, "queue_group", m.cfg.QueueGroup,
		"nats", m.nc.ConnectedUrlRedacted(), "max_inflight", m.cfg.MaxInflight)
}

// credentialStore returns the pool's store of shared logins when the worker reads an auth file
// and the NATS server has JetStream; nil otherwise (logins are then shared through the file
// alone, by the processes of one machine).
func credentialStore(ctx context.Context, nc *nats.Conn, cfg workerConfig, log *slog.Logger) login.Coordinator {
	if cfg.CodexToken != "" {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := queue.NewCredentialStore(sctx, nc, queue.CredentialStoreConfig{Bucket: cfg.CredentialsBucket, Replicas: cfg.CredentialsReplicas})
	switch {
	case errors.Is(err, queue.ErrNoJetStream):
		log.Info("credentials: the NATS server has no JetStream; the login is shared through its auth file only")
		return nil
	case err != nil:
		log.Warn("credentials: no shared credential store; the login is shared through its auth file only", "error", err)
		return nil
	}
	if cfg.CredentialsKey != "" { // without a key the login is not shared, and codex says so
		log.Info("credentials: the login is shared with the pool, sealed", "bucket", cfg.CredentialsBucket)
	}
	return store
}

// serviceVersion is the version as micro requires it: semantic, without a leading v.
func serviceVersion() string {
	v := getVersion()
	if len(v) > 1 && v[0] == 'v' {
		v = v[1:]
	}
	return v
}

// jobsFor decides whether this worker consumes durable jobs: CODEXPOOL_JOBS=on needs JetStream,
// auto uses it when the server has it, off never.
func jobsFor(ctx context.Context, cfg workerConfig, nc *nats.Conn, log *slog.Logger) (*queue.JobsConfig, error) {
	if cfg.Jobs == "off" {
		return nil, nil
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ok, err := queue.JetStreamAvailable(actx, nc)
	switch {
	case err != nil && cfg.Jobs == "on":
		return nil, fmt.Errorf("worker: CODEXPOOL_JOBS=on: %w", err)
	case err != nil:
		log.Warn("durable jobs off: cannot tell whether the server has JetStream", "error", err)
		return nil, nil
	case !ok && cfg.Jobs == "on":
		return nil, errors.New("worker: CODEXPOOL_JOBS=on but the NATS server has no JetStream (start it with --jetstream)")
	case !ok:
		log.Info("durable jobs off: the NATS server has no JetStream")
		return nil, nil
	}
	jc := cfg.jobs()
	return &jc, nil
}
