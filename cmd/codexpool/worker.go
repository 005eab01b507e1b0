package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/metrics"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codex"
)

const workerTrailer = `A worker joins the queue group on the request subject and runs each request it gets as a
generation over a WebSocket to the Codex origin. Start more processes, on more machines, to scale
out. With no CODEXPOOL_NATS_URL the worker embeds a NATS server that clients and other workers
can join.

Environment (CODEXPOOL_*):
`

func runWorker(ctx context.Context, e env, args []string) error {
	var usageTable bytes.Buffer
	if err := printSettings(&usageTable, &workerConfig{}); err != nil {
		return err
	}
	fs := newFlags(e, "worker", "worker [--help]", workerTrailer+usageTable.String())
	if err := fs.parse(e, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.printUsage(e.stderr)
		return exitError{code: 2, msg: fmt.Sprintf("worker takes no arguments, got %q (configure it with CODEXPOOL_* variables)", fs.Args())}
	}
	cfg, err := loadWorkerConfig()
	if err != nil {
		return err
	}
	log, err := newLogger(e.stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return err
	}
	sec := cfg.security()
	natsOpts, err := sec.Options()
	if err != nil {
		return err
	}
	var met *metrics.Metrics
	var obs worker.Observer
	if cfg.MetricsAddr != "" {
		met = metrics.New(cfg.id(), getVersion())
		obs = met
	}
	accts, err := cfg.accounts(e.getenv)
	if err != nil {
		return err
	}
	if accts != nil && (cfg.CodexToken != "" || cfg.CodexAccountID != "") {
		log.Warn("CODEXPOOL_CODEX_TOKEN and CODEXPOOL_CODEX_ACCOUNT_ID are ignored: CODEXPOOL_ACCOUNTS lists the accounts",
			"accounts_file", cfg.Accounts)
	}
	// Fail before NATS when there are no credentials at all: a person is reading the error.
	if accts == nil {
		if _, err := codex.ResolveCredentials(cfg.CodexToken, cfg.CodexAccountID, cfg.authFilePath()); errors.Is(err, codex.ErrNoCredentials) {
			return fmt.Errorf("%w (set CODEXPOOL_CODEX_TOKEN, CODEXPOOL_CODEX_AUTH_FILE to a Codex CLI login, or CODEXPOOL_ACCOUNTS)", err)
		} else if err != nil {
			return err
		}
	}

	// serving is true from the subscription's start until shutdown begins (/readyz).
	var serving atomic.Bool
	if met != nil {
		ms, err := metrics.Start(cfg.MetricsAddr, met, log)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = ms.Shutdown(sctx)
		}()
		log.Info("metrics listening", "addr", ms.Addr(), "paths", "/metrics /healthz /readyz")
	}

	url := cfg.NATSURL
	var ns *server.Server
	if url == "" {
		var opts []queue.EmbeddedOption
		if cfg.Jobs != "off" {
			opts = append(opts, queue.WithJetStream(cfg.embeddedStore()))
		}
		ns, err = queue.StartEmbedded(cfg.EmbeddedNATSAddr, log, opts...)
		if err != nil && cfg.Jobs == "auto" && opts != nil {
			// The store is unusable (unwritable, another server's): serve requests without jobs.
			log.Warn("durable jobs off: the embedded server's JetStream store cannot be used", "store", cfg.embeddedStore(), "error", err)
			cfg.Jobs = "off"
			ns, err = queue.StartEmbedded(cfg.EmbeddedNATSAddr, log)
		}
		if err != nil {
			return err
		}
		defer func() {
			ns.Shutdown()
			ns.WaitForShutdown()
		}()
		url = ns.ClientURL()
		log.Info("embedded NATS server started", "url", url, "jetstream", cfg.Jobs != "off")
	}
	if sec.Kind() != "none" || sec.TLS() {
		log.Info("NATS security", "auth", sec.Kind(), "tls", sec.TLS(), "client_cert", sec.TLSCert != "")
	}
	nc, err := queue.Connect(ctx, url, "codexpool worker "+cfg.id(), log, natsOpts...)
	if err != nil {
		return err
	}
	defer nc.Close()

	w, err := worker.New(cfg.worker(accts), worker.Options{Logger: log, Version: getVersion(), Observer: obs,
		Coordinator: credentialStore(ctx, nc, cfg, log)})
	if err != nil {
		return err
	}
	defer w.Close()

	qcfg := cfg.queue()
	qcfg.Logger = log
	qcfg.StatsData = func(st queue.Stats) any {
		return struct {
			queue.Stats
			worker.StatsData
		}{st, w.StatsData()}
	}
	if qcfg.Jobs, err = jobsFor(ctx, cfg, nc, log); err != nil {
		return err
	}
	if met != nil {
		qcfg.ObserveResultWrite = met.ObserveResultWrite
	}
	svc, err := queue.NewService(nc, qcfg, w)
	if err != nil {
		return err
	}
	for _, a := range w.Accounts() { // each account's gate shares with the gates of the same account
		subject, ok := queue.GateScopeSubject(cfg.GateScope, a.Identity)
		if !ok || a.Gate.Snapshot().Mode != gate.Adaptive {
			continue
		}
		link, err := queue.LinkGate(nc, subject, a.Gate, 0, log)
		if err != nil {
			return fmt.Errorf("worker: gate state of account %s: %w", a.Name, err)
		}
		defer link.Close()
		log.Info("gate shares state", "account", a.Name, "scope", cfg.GateScope, "subject", link.Stats().Subject)
	}
	serving.Store(true)
	if met != nil {
		met.SetSources(metrics.Sources{
			Service:  svc.Stats,
			Upstream: w.UpstreamStats,
			Gate:     w.GateSnapshot,
			Accounts: w.AccountStats,
			NATS:     nc,
			Ready: func() bool {
				return serving.Load() && nc.IsConnected() && !svc.Stats().Draining
			},
		})
	}
	log.Info("serving", "worker", w.ID(), "subject", cfg.Subject, "queue_group", cfg.QueueGroup,
		"nats", nc.ConnectedUrlRedacted(), "max_inflight", cfg.MaxInflight)

	<-ctx.Done()
	serving.Store(false)
	log.Info("shutting down: no new requests, finishing in-flight", "grace", cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	err = svc.Shutdown(sctx)
	cancel()
	if err != nil {
		log.Warn("shutdown", "error", err)
	}
	// While NATS is still up: a token refresh in flight is finished and its answer shared with
	// the pool (it may hold the only valid refresh token).
	_ = w.Close()
	// Drain flushes every reply already published before the connection closes.
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err == nil {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			log.Warn("NATS drain did not finish in 10s; closing")
		}
	}
	log.Info("stopped", "worker", w.ID())
	return nil
}

// credentialStore returns the pool's store of shared logins when the worker reads an auth file
// and the NATS server has JetStream; nil otherwise (logins are then shared through the file
// alone, by the processes of one machine).
func credentialStore(ctx context.Context, nc *nats.Conn, cfg workerConfig, log *slog.Logger) codex.Coordinator {
	if cfg.CodexToken != "" {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := queue.NewCredentialStore(sctx, nc, queue.CredentialStoreConfig{Bucket: cfg.CredentialsBucket})
	switch {
	case errors.Is(err, queue.ErrNoJetStream):
		log.Info("credentials: the NATS server has no JetStream; the login is shared through its auth file only")
		return nil
	case err != nil:
		log.Warn("credentials: no shared credential store; the login is shared through its auth file only", "error", err)
		return nil
	}
	log.Info("credentials: the login is shared with the pool", "bucket", cfg.CredentialsBucket, "encrypted", cfg.CredentialsKey != "")
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
