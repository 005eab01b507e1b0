// Package worker runs generations: a validated request goes through the connect gate to a Codex
// socket (pooled or new) and comes back as a one-shot response or a stream of events.
//
// Call LoadConfig, then New; the Worker is the queue.Generator the NATS service plugs in.
// The Worker knows nothing of NATS: queue owns subjects, replies and in-flight limits.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
}

// Options are the dependencies of a Worker that do not come from the environment.
type Options struct {
	Logger  *slog.Logger // nil = discard
	Version string       // sent upstream as the client version
}

// New returns a Worker for cfg. It resolves the Codex credentials (token, else the auth file)
// and fails with a clear message, never containing a secret, when there are none.
func New(cfg Config, opts Options) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	creds, err := codex.ResolveCredentials(cfg.CodexToken, cfg.CodexAccountID, cfg.AuthFilePath())
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	mode, _ := cfg.GateMode()
	g := gate.New(gate.Config{Mode: mode, Floor: time.Duration(cfg.WSConnectSpacingMS) * time.Millisecond})
	cc, err := codex.New(codex.Config{
		URL:       cfg.CodexURL,
		Token:     creds.Token,
		AccountID: creds.AccountID,
		Gate:      g,
		Policy: gate.Policy{
			ForbiddenCooldown: time.Duration(cfg.ForbiddenCooldownMS) * time.Millisecond,
			ConnectTimeout:    cfg.ConnectTimeout,
		},
		NoReuse:     !cfg.WSReuse,
		MaxIdle:     cfg.MaxInflight,
		IdleTimeout: cfg.IdleTimeout,
		Version:     opts.Version,
		Logger:      log,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	id := cfg.ID()
	log.Info("worker ready", "worker", id, "origin", cfg.CodexURL, "credentials", creds.Source,
		"gate", mode, "floor_ms", cfg.WSConnectSpacingMS, "reuse", cfg.WSReuse, "model", cfg.Model)
	return &Worker{cfg: cfg, id: id, log: log, gate: g, codex: cc}, nil
}

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
	var onEvent func(codex.Event) error
	if emit != nil {
		onEvent = func(ev codex.Event) error { return emit(ev.Data) }
	}
	res, err := w.codex.Generate(ctx, frame, onEvent)
	var out []byte
	if err == nil && emit == nil {
		out, err = schemas.WithOutputText(res.Response)
		if err != nil {
			err = schemas.Errorf(schemas.CodeUpstreamError, "response.completed carried a bad response object: %v", err)
		}
	}
	w.logResult(ctx, req, res, err, time.Since(start))
	return out, err
}

func (w *Worker) logResult(ctx context.Context, req *schemas.Request, res *codex.Result, err error, d time.Duration) {
	attrs := []slog.Attr{
		slog.String("request_id", req.ID), slog.String("worker", w.id), slog.Bool("stream", req.Stream),
		slog.Duration("duration", d),
	}
	if res != nil {
		attrs = append(attrs, slog.Duration("gate_wait", res.GateWait), slog.Int("attempts", res.Attempts),
			slog.Bool("reused", res.Reused), slog.Bool("retried", res.Retried), slog.Int("events", res.Events))
	}
	level := slog.LevelInfo
	switch e, ok := schemas.AsError(err); {
	case err == nil:
		attrs = append(attrs, slog.Int("status", 200))
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
		attrs = append(attrs, slog.Int("status", 502), slog.String("error", err.Error()))
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
		},
		"upstream": w.codex.Stats(),
	}
}

// Gate returns the worker's connect gate (for stats and tests).
func (w *Worker) Gate() *gate.Gate { return w.gate }

// Close closes idle upstream sockets. In-flight generations finish or fail on their own.
func (w *Worker) Close() error { return w.codex.Close() }
