// Package worker runs generations: a validated request goes to one of the worker's accounts,
// through that account's connect gate to a Codex socket (pooled or new), and comes back as a
// one-shot response or a stream of events.
//
// Call New with a Config (LoadAccounts reads an accounts file into Config.Accounts); the
// Worker's Generate method is what the NATS service (package queue) calls for every request. The
// Worker knows nothing of NATS: queue owns subjects, replies and in-flight limits.
package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/internal/egress"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex"
	"github.com/codexpool/codexpool/worker/codex/login"
)

// Worker runs generations against one Codex origin with one or more accounts. Safe for concurrent
// use.
type Worker struct {
	cfg      Config
	id       string
	log      *slog.Logger
	router   *router
	obs      Observer
	coord    login.Coordinator // shares logins between workers; nil = each worker on its own
	policy   policy            // accountsPolicy with Config.Accounts, else shortcutPolicy
	sticky   *sticky           // nil = no sticky routing (Config.NoSticky)
	slots    Slots             // leases of Account.MaxConcurrent slots
	sessions *sessionTable     // the sessions this worker owns (session.go)

	// lastSpacing is the gate spacing (ns) the last debug gate line reported per account, to log
	// changes.
	lastSpacing []atomic.Int64
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
	Coordinator login.Coordinator
	// Slots counts the generations of accounts with a MaxConcurrent across the pool:
	// queue.LeaseStore. Nil = this process's generations only.
	Slots Slots
	// Bindings holds the sticky bindings of sessions to accounts, shared with the pool:
	// queue.SessionStore. Nil = this process remembers the Config.AffinityKeys most recent ones.
	Bindings Bindings
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
	// Account is the name of the account that answered; "" when none did (every account was
	// cooling down).
	Account string
	// Model is the model the generation asked for (the default filled in); Code the error code
	// of a failed one ("" on success); Metered is Request.Metered (a gateway records its usage).
	Model   string
	Code    string
	Metered bool
	// Usage is the "usage" object of the response (raw JSON); nil when there was none.
	Usage []byte
}

// Observer receives one Generation per finished generation (metrics.Metrics is one). It is called
// on the generation's goroutine and must not block.
type Observer interface {
	ObserveGeneration(Generation)
}

// New returns a Worker for cfg. It resolves every account's Codex credentials (Token, else
// AuthFile) and fails with a clear message naming the account, never containing a secret, when
// one has none; an Account without a name or with a duplicate name, a MaxUsedPercent outside
// [0, 100] and a gate.Config with an unknown Mode are errors too. Each account gets its own gate
// (gate.New(cfg.Gate)) and its own Codex client.
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
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = DefaultCooldown
	}
	if cfg.AffinityKeys <= 0 {
		cfg.AffinityKeys = DefaultAffinityKeys
	}
	if cfg.StickyWait <= 0 {
		cfg.StickyWait = DefaultStickyWait
	}
	if cfg.AccountQueueTimeout <= 0 {
		cfg.AccountQueueTimeout = DefaultAccountQueueTimeout
	}
	if cfg.StickyRefresh <= 0 {
		cfg.StickyRefresh = DefaultStickyRefresh
	}
	if _, err := gate.ParseMode(string(cfg.Gate.Mode)); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if err := checkAccounts(cfg.Accounts); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, accts := accountsPolicy, cfg.Accounts
	if len(accts) == 0 {
		p, accts = shortcutPolicy, []Account{{Name: DefaultAccountName, Token: cfg.Token, AccountID: cfg.AccountID, AuthFile: cfg.AuthFile}}
	}
	w := &Worker{cfg: cfg, id: cfg.ID, log: log, obs: opts.Observer, coord: opts.Coordinator, policy: p,
		lastSpacing: make([]atomic.Int64, len(accts)), sessions: newSessionTable(cfg.SessionIdleTimeout, cfg.MaxSessions),
		router: &router{cooldown: cfg.Cooldown}, sticky: newSticky(cfg, opts.Bindings), slots: opts.Slots}
	if w.slots == nil {
		w.slots = &memSlots{}
	}
	for i, ac := range accts {
		a, err := w.newAccount(i, ac, opts.Version)
		if err != nil {
			_ = w.Close()
			if !p.name {
				return nil, fmt.Errorf("worker: %w", err)
			}
			return nil, fmt.Errorf("worker: account %q: %w", ac.Name, err)
		}
		w.router.accounts = append(w.router.accounts, a)
	}
	w.logReady()
	return w, nil
}

// logReady writes the lines of a worker that is ready: one per account when the policy names
// accounts, then the worker's own.
func (w *Worker) logReady() {
	first, cfg := w.router.accounts[0], w.cfg
	if !w.policy.name {
		w.log.Info("worker ready", "worker", cfg.ID, "origin", cfg.URL, "credentials", first.source,
			"gate", first.gate.Snapshot().Mode, "floor", cfg.Gate.Floor, "reuse", !cfg.NoReuse, "model", cfg.Model)
		return
	}
	names := make([]string, len(w.router.accounts))
	for i, a := range w.router.accounts {
		names[i] = a.name
		w.log.Info("account ready", "worker", cfg.ID, "account", a.name, "credentials", a.source,
			"identity", a.identity, "max_used_percent", a.lim.ceiling)
	}
	w.log.Info("worker ready", "worker", cfg.ID, "origin", cfg.URL, "accounts", names,
		"gate", first.gate.Snapshot().Mode, "floor", cfg.Gate.Floor, "reuse", !cfg.NoReuse, "model", cfg.Model)
}

// newAccount resolves ac's credentials and makes its gate, limit state and Codex client.
func (w *Worker) newAccount(i int, ac Account, version string) (*account, error) {
	if ac.ProxyURL == "" {
		ac.ProxyURL = w.cfg.ProxyURL
	}
	creds, err := login.ResolveCredentials(ac.Token, ac.AccountID, ac.AuthFile)
	if err != nil {
		return nil, err
	}
	source := creds.Source
	if ac.source != "" && ac.Token != "" {
		source = ac.source
	}
	a := &account{index: i, name: ac.Name, identity: identity(creds), source: source,
		gate: gate.New(w.cfg.Gate), lim: newLimitState(ac.MaxUsedPercent), maxConcurrent: ac.MaxConcurrent}
	a.lim.recordOnly = !w.policy.enforce
	var src login.TokenSource
	if creds.Source != "env" && ac.Token == "" { // a login file: kept fresh for as long as the worker runs
		a.auth, err = login.OpenAuth(login.AuthConfig{
			File: creds.Source, Name: ac.Name, AccountID: ac.AccountID, RefreshURL: w.cfg.RefreshURL,
			ClientID: w.cfg.ClientID, Coordinator: w.coord, ShareKey: w.cfg.CredentialsKey,
			WorkerID: w.cfg.ID, Logger: w.log, ProxyURL: ac.ProxyURL,
		})
		if err != nil {
			return nil, err
		}
		src = a.auth
	}
	a.codex, err = codex.New(codex.Config{
		URL:          w.cfg.URL,
		Credentials:  src,
		Token:        creds.Token,
		AccountID:    creds.AccountID,
		WSRetryAfter: w.cfg.WSRetryAfter,
		Gate:         a.gate,
		Policy:       w.cfg.Policy,
		NoReuse:      w.cfg.NoReuse,
		MaxIdle:      w.cfg.MaxIdleSockets,
		IdleTimeout:  w.cfg.IdleTimeout,
		Version:      version,
		Logger:       w.log,
		OnLimits:     func(l codex.Limits) { w.onLimits(a, l) },
		ProxyURL:     ac.ProxyURL,
	})
	if err != nil {
		if a.auth != nil {
			a.auth.Close()
		}
		return nil, err
	}
	return a, nil
}

// identity is a stable, non-secret name for the credentials, the same in every worker that uses
// them (see AccountIdentity).
func identity(c login.Credentials) string { return AccountIdentity(c.AccountID, c.Token) }

// AccountIdentity names an account without revealing its credentials: a hash of the ChatGPT
// account id when there is one (it survives token refreshes), else of the token (API keys).
func AccountIdentity(accountID, token string) string {
	src := "token\x00" + token
	if accountID != "" {
		src = "account\x00" + accountID
	}
	sum := sha256.Sum256([]byte("codexpool identity\x00" + src))
	return hex.EncodeToString(sum[:8])
}

// checkAccounts validates Config.Accounts.
func checkAccounts(accts []Account) error {
	seen := make(map[string]bool, len(accts))
	for i, a := range accts {
		switch {
		case a.Name == "":
			return fmt.Errorf("worker: Accounts[%d] has no name", i)
		case seen[a.Name]:
			return fmt.Errorf("worker: account name %q is used twice", a.Name)
		case a.MaxUsedPercent < 0 || a.MaxUsedPercent > 100 || math.IsNaN(a.MaxUsedPercent):
			return fmt.Errorf("worker: account %q: MaxUsedPercent must be between 0 and 100, got %v", a.Name, a.MaxUsedPercent)
		case a.MaxConcurrent < 0:
			return fmt.Errorf("worker: account %q: MaxConcurrent must not be negative, got %d", a.Name, a.MaxConcurrent)
		}
		seen[a.Name] = true
	}
	return nil
}

// onLimits records a usage report of a's origin and logs a cooldown it begins (the usage itself
// when the policy names accounts: the shortcut's logs stay as they were before accounts).
func (w *Worker) onLimits(a *account, l codex.Limits) {
	now := time.Now()
	grew, until, why := w.router.observe(a, l, now)
	if w.policy.name && w.log.Enabled(context.Background(), slog.LevelDebug) {
		for _, win := range l.Windows {
			w.log.Debug("account usage", "account", a.name, "limit", win.Limit, "window_minutes", win.Minutes,
				"used_percent", win.UsedPercent, "reset_at", win.ResetAt)
		}
	}
	if grew {
		w.log.Warn("account cooling down", "worker", w.id, "account", a.name, "until", until,
			"for", until.Sub(now).Round(time.Second), "reason", why)
	}
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.id }

// refused classifies err from account a: "limits" for a usage or rate limit, "credentials" for
// a 401, "proxy" for a failure of the account's proxy, "" for anything else. A refusal cools a
// down (with Config.Accounts).
func (w *Worker) refused(a *account, err error) string {
	if pe, ok := egress.AsError(err); ok {
		return w.proxyFailed(a, pe)
	}
	e, ok := schemas.AsError(err)
	if !ok {
		return ""
	}
	code, reason := e.UpstreamCode, ""
	switch {
	case e.Code == schemas.CodeUpstreamUnauthorized:
		reason, code = "credentials", codeUnauthorized
		a.unauthorized.Add(1)
	case e.Code == schemas.CodeUpstreamRateLimited,
		e.UpstreamCode == "usage_limit_reached", e.UpstreamCode == "usage_not_included":
		reason = "limits"
		a.limited.Add(1)
	default:
		return ""
	}
	now := time.Now()
	if grew, until := w.router.refuse(a, code, e.Message, e.RetryAfter, now); grew {
		w.log.Warn("account cooling down", "worker", w.id, "account", a.name, "until", until,
			"for", until.Sub(now).Round(time.Second), "reason", e.Error())
	}
	return reason
}

// proxyFailed cools a down for a failure of its proxy (unreachable, 407, no answer in time):
// the account is out until the cooldown ends, the generation moves on. The reason names the
// proxy by its redacted URL.
func (w *Worker) proxyFailed(a *account, pe *egress.Error) string {
	a.proxyFailures.Add(1)
	now := time.Now()
	why := strings.TrimPrefix(pe.Error(), "egress: ") // "proxy <redacted URL>: what failed"
	if grew, until := w.router.refuse(a, codeProxy, why, 0, now); grew {
		w.log.Warn("account cooling down", "worker", w.id, "account", a.name, "until", until,
			"for", until.Sub(now).Round(time.Second), "reason", why)
	}
	return reasonProxy
}

// noAccountLeft is the error of a generation pick found no account for: the last refusal when
// the generation reached the origin (with the earliest time an account is usable again), else
// cooling (every account is cooling down), else a 503 that should never happen.
func (w *Worker) noAccountLeft(last error, cooling *schemas.Error) error {
	e, ok := schemas.AsError(last)
	if !ok {
		if cooling != nil {
			return cooling
		}
		if last != nil {
			return last
		}
		return schemas.Errorf(schemas.CodeUnavailable, "worker: no account to generate with")
	}
	if t, all := w.router.earliest(time.Now()); all && e.Status == http.StatusTooManyRequests {
		cp := *e // not the shared value: other requests may hold it
		cp.RetryAfter = max(time.Until(t), time.Second)
		return &cp
	}
	return e
}

// logGate writes the gate's decisions at debug level: how long a generation that dialed waited
// and on how many attempts, and every change of the account's gate spacing (widened after a 403,
// relaxed after sustained success). The gate package itself does no I/O.
func (w *Worker) logGate(ctx context.Context, req *schemas.Request, a *account, res *codex.Result) {
	if !w.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s, acct := a.gate.Snapshot(), w.policy.accountAttrs(a)
	if res != nil && res.Attempts > 0 {
		w.log.LogAttrs(ctx, slog.LevelDebug, "gate: permit", append([]slog.Attr{
			slog.String("request_id", req.ID), slog.String("mode", string(s.Mode)),
			slog.Duration("gate_wait", res.GateWait), slog.Int("attempts", res.Attempts),
			slog.Duration("spacing", s.Spacing), slog.Int64("starts", s.Starts)}, acct...)...)
	}
	if prev := w.lastSpacing[a.index].Swap(int64(s.Spacing)); prev != int64(s.Spacing) {
		w.log.LogAttrs(ctx, slog.LevelDebug, "gate: spacing changed", append([]slog.Attr{
			slog.String("mode", string(s.Mode)), slog.Duration("from", time.Duration(prev)),
			slog.Duration("to", s.Spacing), slog.Int64("rejections", s.Rejections),
			slog.Int("streak", s.Streak)}, acct...)...)
	}
}

// logResult writes the one line per generation an operator filters on: request_id, worker,
// status, code ("ok" on success), duration, first_event, and — when a socket was used — gate_wait,
// attempts and reused. With Config.Accounts it adds the account that answered and, when the
// generation moved, how many accounts it tried. Successes log at info, failures at warn.
func (w *Worker) logResult(ctx context.Context, req *schemas.Request, a *account, tried int, res *codex.Result, err error, d, firstEvent time.Duration) {
	attrs := []slog.Attr{
		slog.String("request_id", req.ID), slog.String("worker", w.id), slog.Bool("stream", req.Stream),
		slog.Duration("duration", d), slog.Duration("first_event", firstEvent),
	}
	attrs = append(attrs, w.policy.accountAttrs(a)...)
	if tried > 1 {
		attrs = append(attrs, slog.Int("accounts_tried", tried))
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
	case errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), schemas.ErrCancelled):
		attrs = append(attrs, slog.Int("status", schemas.StatusCancelled), slog.String("code", string(schemas.CodeCancelled)))
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

// Close closes every account's idle upstream sockets and its credentials, which first finish a
// token refresh in flight and share its answer (keep the pool's connection open until Close
// returns). In-flight generations finish or fail on their own.
func (w *Worker) Close() error {
	w.sessions.close()
	for _, a := range w.router.accounts {
		_ = a.codex.Close()
		if a.auth != nil {
			a.auth.Close()
		}
	}
	return nil
}
