// Package worker runs generations: a validated request goes through the connect gate to a Codex
// socket (pooled or new) and comes back as a one-shot response or a stream of events.
//
// Call New with a Config; the Worker's Generate method is what the NATS service (package queue)
// calls for every request. The Worker knows nothing of NATS: queue owns subjects, replies and
// in-flight limits.
package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex"
)

// Worker runs generations against one Codex origin. Safe for concurrent use.
type Worker struct {
	cfg   Config
	id    string
	log   *slog.Logger
	gate  *gate.Gate
	codex *codex.Client
	auth  *codex.Auth // nil with a fixed token
	obs   Observer

	identity string // see Identity

	// lastSpacing is the gate spacing (ns) the last debug gate line reported, to log changes.
	lastSpacing atomic.Int64
}

// Options are the dependencies of a Worker.
type Options struct {
	Logger  *slog.Logger // nil = discard
	Version string       // sent upstream as the client version
	// Observer receives every generation's latency, time to first event and gate wait; nil = none.
	Observer Observer
	// Coordinator shares the login of an auth file with the rest of the pool (one refresher at
	// a time, rotated tokens to everyone): queue.CredentialStore. Nil = shared with this
	// machine's other processes only, through the file.
	Coordinator codex.Coordinator
}

// Generation is what a worker observes about one generation, for metrics.
type Generation struct {
	OK       bool          // answered successfully
	Duration time.Duration // from the start of Generate to its end
	// FirstEvent is the time to the first upstream event; 0 when none arrived.
	FirstEvent time.Duration
	// Dialed is true when the generation opened a socket through the gate (not a pooled one);
	// GateWait is then the time it spent waiting in the gate and any 403 cooldown.
	Dialed   bool
	GateWait time.Duration
}

// Observer receives one Generation per finished generation (metrics.Metrics is one). It is called
// on the generation's goroutine and must not block.
type Observer interface {
	ObserveGeneration(Generation)
}

// New returns a Worker for cfg. It resolves the Codex credentials (Token, else AuthFile) and
// fails with a clear message, never containing a secret, when there are none; a gate.Config with
// an unknown Mode is an error too.
func New(cfg Config, opts Options) (*Worker, error) {
	if cfg.ID == "" {
		cfg.ID = "worker"
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.URL == "" {
		cfg.URL = codex.DefaultURL
	}
	if _, err := gate.ParseMode(string(cfg.Gate.Mode)); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	creds, err := codex.ResolveCredentials(cfg.Token, cfg.AccountID, cfg.AuthFile)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	var auth *codex.Auth
	var src codex.TokenSource
	if creds.Source != "env" { // a login file: kept fresh for as long as the worker runs
		auth, err = codex.OpenAuth(codex.AuthConfig{
			File: cfg.AuthFile, AccountID: cfg.AccountID, RefreshURL: cfg.RefreshURL, ClientID: cfg.ClientID,
			Coordinator: opts.Coordinator, ShareKey: cfg.CredentialsKey, WorkerID: cfg.ID, Logger: log,
		})
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		src = auth
	}
	g := gate.New(cfg.Gate)
	cc, err := codex.New(codex.Config{
		URL:          cfg.URL,
		Credentials:  src,
		Token:        creds.Token,
		AccountID:    creds.AccountID,
		WSRetryAfter: cfg.WSRetryAfter,
		Gate:         g,
		Policy:       cfg.Policy,
		NoReuse:      cfg.NoReuse,
		MaxIdle:      cfg.MaxIdleSockets,
		IdleTimeout:  cfg.IdleTimeout,
		Version:      opts.Version,
		Logger:       log,
	})
	if err != nil {
		if auth != nil {
			auth.Close()
		}
		return nil, fmt.Errorf("worker: %w", err)
	}
	log.Info("worker ready", "worker", cfg.ID, "origin", cfg.URL, "credentials", creds.Source,
		"gate", g.Snapshot().Mode, "floor", cfg.Gate.Floor, "reuse", !cfg.NoReuse, "model", cfg.Model)
	return &Worker{cfg: cfg, id: cfg.ID, log: log, gate: g, codex: cc, auth: auth, obs: opts.Observer,
		identity: AccountIdentity(creds.AccountID, creds.Token)}, nil
}

// AccountIdentity names an account without revealing its credentials: a hash of the ChatGPT
// account id when there is one (it survives token refreshes), else of the token.
func AccountIdentity(accountID, token string) string {
	v := "account\x00" + accountID
	if accountID == "" {
		v = "token\x00" + token
	}
	sum := sha256.Sum256([]byte("codexpool identity\x00" + v))
	return hex.EncodeToString(sum[:12])
}

// Identity returns a stable, non-secret name of the worker's account (a hash): gates of workers
// with the same identity share one upgrade limit.
func (w *Worker) Identity() string { return w.identity }

// ID returns the worker's id.
func (w *Worker) ID() string { return w.id }

// Generate runs one generation. With emit nil it returns the one-shot reply payload (the
// response object with output_text); otherwise it passes every upstream event to emit, in
// order, and returns a nil payload. Errors are *schemas.Error or ctx.Err().
func (w *Worker) Generate(ctx context.Context, req *schemas.Request, emit func(event []byte) error) ([]byte, error) {
	start := time.Now()
	frame, err := req.Upstream(w.cfg.Model)
	if err != nil {
		return nil, schemas.Errorf(schemas.CodeInvalidRequest, "%v", err)
	}
	// codex calls onEvent on the generation's own goroutine, so firstEvent needs no lock.
	var firstEvent time.Duration
	onEvent := func(ev codex.Event) error {
		if firstEvent == 0 {
			firstEvent = max(time.Since(start), time.Nanosecond)
		}
		if emit != nil {
			return emit(ev.Data)
		}
		return nil
	}
	res, err := w.codex.Generate(ctx, frame, onEvent)
	var out []byte
	if err == nil && emit == nil {
		out, err = schemas.WithOutputText(res.Response)
		if err != nil {
			err = schemas.Errorf(schemas.CodeUpstreamError, "response.completed carried a bad response object: %v", err)
		}
	}
	d := time.Since(start)
	if w.obs != nil {
		g := Generation{OK: err == nil, Duration: d, FirstEvent: firstEvent}
		if res != nil && res.Attempts > 0 {
			g.Dialed, g.GateWait = true, res.GateWait
		}
		w.obs.ObserveGeneration(g)
	}
	w.logResult(ctx, req, res, err, d, firstEvent)
	w.logGate(ctx, req, res)
	return out, err
}

// logGate writes the gate's decisions at debug level: how long a generation that dialed waited
// and on how many attempts, and every change of the gate's spacing (widened after a 403,
// relaxed after sustained success). The gate package itself does no I/O.
func (w *Worker) logGate(ctx context.Context, req *schemas.Request, res *codex.Result) {
	if !w.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s := w.gate.Snapshot()
	if res != nil && res.Attempts > 0 {
		w.log.LogAttrs(ctx, slog.LevelDebug, "gate: permit",
			slog.String("request_id", req.ID), slog.String("mode", string(s.Mode)),
			slog.Duration("gate_wait", res.GateWait), slog.Int("attempts", res.Attempts),
			slog.Duration("spacing", s.Spacing), slog.Int64("starts", s.Starts))
	}
	if prev := w.lastSpacing.Swap(int64(s.Spacing)); prev != int64(s.Spacing) {
		w.log.LogAttrs(ctx, slog.LevelDebug, "gate: spacing changed",
			slog.String("mode", string(s.Mode)), slog.Duration("from", time.Duration(prev)),
			slog.Duration("to", s.Spacing), slog.Int64("rejections", s.Rejections),
			slog.Int("streak", s.Streak))
	}
}

// logResult writes the one line per generation an operator filters on: request_id, worker,
// status, code ("ok" on success), duration, first_event, and — when a socket was used — gate_wait,
// attempts and reused. Successes log at info, failures at warn.
func (w *Worker) logResult(ctx context.Context, req *schemas.Request, res *codex.Result, err error, d, firstEvent time.Duration) {
	attrs := []slog.Attr{
		slog.String("request_id", req.ID), slog.String("worker", w.id), slog.Bool("stream", req.Stream),
		slog.Duration("duration", d), slog.Duration("first_event", firstEvent),
	}
	if res != nil {
		attrs = append(attrs, slog.Duration("gate_wait", res.GateWait), slog.Int("attempts", res.Attempts),
			slog.Bool("reused", res.Reused), slog.Bool("retried", res.Retried), slog.Int("events", res.Events))
	}
	level := slog.LevelInfo
	switch e, ok := schemas.AsError(err); {
	case err == nil:
		attrs = append(attrs, slog.Int("status", 200), slog.String("code", "ok"))
	case ok:
		level = slog.LevelWarn
		attrs = append(attrs, slog.Int("status", e.Status), slog.String("code", string(e.Code)), slog.String("error", e.Message))
		if e.UpstreamCode != "" {
			attrs = append(attrs, slog.String("upstream_code", e.UpstreamCode))
		}
	case errors.Is(err, context.DeadlineExceeded):
		level = slog.LevelWarn
		attrs = append(attrs, slog.Int("status", 504), slog.String("code", string(schemas.CodeUpstreamTimeout)))
	case errors.Is(err, context.Canceled):
		level = slog.LevelWarn
		attrs = append(attrs, slog.Int("status", 503), slog.String("code", string(schemas.CodeUnavailable)))
	default:
		level = slog.LevelWarn
		attrs = append(attrs, slog.Int("status", 502), slog.String("code", string(schemas.CodeUpstreamError)),
			slog.String("error", err.Error()))
	}
	w.log.LogAttrs(ctx, level, "generation", attrs...)
}

// StatsData returns the worker's gate and upstream state for the service's stats.
func (w *Worker) StatsData() map[string]any {
	s := w.gate.Snapshot()
	return map[string]any{
		"gate": map[string]any{
			"mode": s.Mode, "spacing_ms": s.Spacing.Milliseconds(), "streak": s.Streak,
			"rejections": s.Rejections, "starts": s.Starts, "waited_ms": s.Waited.Milliseconds(),
			"successes": s.Successes, "failures": s.Failures,
			"window": s.Window, "in_flight": s.InFlight, "queued": s.Queued,
			"closed": s.Closed, "epoch": s.Epoch, "peers": s.Peers, "fleet_accepted_per_s": s.FleetAccepted,
			"signals": map[string]int64{"applied": s.SignalsApplied, "invalid": s.SignalsInvalid,
				"stale": s.SignalsStale, "flooded": s.SignalsFlooded, "unknown": s.SignalsUnknown},
		},
		"upstream": w.codex.Stats(),
	}
}

// UpstreamStats returns the Codex client's counters (sockets, upgrades, retries).
func (w *Worker) UpstreamStats() codex.Stats { return w.codex.Stats() }

// Gate returns the worker's connect gate (for stats and tests).
func (w *Worker) Gate() *gate.Gate { return w.gate }

// Close closes idle upstream sockets and stops keeping the login fresh. In-flight generations
// finish or fail on their own.
func (w *Worker) Close() error {
	err := w.codex.Close()
	if w.auth != nil {
		w.auth.Close()
	}
	return err
}
