package login

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/codexpool/codexpool/internal/egress"
	"github.com/codexpool/codexpool/schemas"
)

// A TokenSource gives a Client the credentials of each new connection and is told when the
// origin refuses them. [Auth] is one; New makes a fixed one from Config.Token.
type TokenSource interface {
	// Credentials returns the credentials to open a connection with, or an error (a 401
	// *schemas.Error) when there are none worth sending.
	Credentials() (Credentials, error)
	// Unauthorized is told that the origin answered refused with a 401. It returns credentials
	// worth one more attempt, or an error (a 401 *schemas.Error) when there are none; it may wait
	// for a refresh in progress, until ctx is done.
	Unauthorized(ctx context.Context, refused Credentials) (Credentials, error)
}

// Timing of an Auth (constants: the settings that matter to operators are in AuthConfig).
const (
	// refreshLead is how long before the access token's exp it is refreshed; tokens that live
	// less than 5·refreshLead are refreshed at 80% of their life instead.
	refreshLead = 5 * time.Minute
	// unauthorizedEvery bounds how often a 401 from the origin triggers a refresh: a token the
	// origin refuses however fresh it is must not turn every request into a refresh.
	unauthorizedEvery = 30 * time.Second
	// claimTTL: a refresh claim in the Coordinator that has not changed for this long (measured
	// by the waiting worker's own clock, so clocks need not agree) belongs to a dead worker and
	// is taken over. The holder renews it every claimTTL/4 while its refresh is in flight.
	claimTTL = 20 * time.Second
	// busyRetry is how soon a worker looks again when another one is refreshing.
	busyRetry = 250 * time.Millisecond
	// Backoff after a failed refresh: doubling from minBackoff to maxBackoff.
	minBackoff = 2 * time.Second
	maxBackoff = 2 * time.Minute
	// DefaultStoreTimeout bounds one Coordinator call (AuthConfig.StoreTimeout).
	DefaultStoreTimeout = 5 * time.Second
)

// AuthConfig configures an Auth. Zero values are the documented defaults; File is required.
type AuthConfig struct {
	// File is the Codex CLI auth.json ("~" is expanded). Required.
	File string
	// Name names the account in logs and errors. Default "default".
	Name string
	// AccountID, when set, is sent as ChatGPT-Account-Id instead of the login's own.
	AccountID string
	// RefreshURL is the OAuth token endpoint. Default DefaultRefreshURL.
	RefreshURL string
	// ClientID is the OAuth client id sent with a refresh. Default DefaultClientID.
	ClientID string
	// RefreshTimeout bounds one refresh request. Default DefaultRefreshTimeout (60s): a refresh
	// that times out may have rotated the token without us learning the new one, so it is
	// better to wait long than to give up early.
	RefreshTimeout time.Duration
	// Poll is how often the file is checked for changes (its size, modification time and
	// inode; it is read only when one of them changed). Default DefaultAuthPoll (2s).
	Poll time.Duration
	// Coordinator shares the login with the rest of the pool: one refresher at a time, and its
	// tokens reach everyone. Nil: not shared beyond this machine, where processes using the
	// same file still take turns through a lock file beside it (".auth.json.lock"). It is used
	// only with a ShareKey.
	Coordinator Coordinator
	// ShareKey is the pool key (CODEXPOOL_CREDENTIALS_KEY, or the content of a key file read
	// with LoadKeyFile): every value written to the Coordinator is sealed under it (AES-256-GCM,
	// key derived with HKDF-SHA-256, bound to the login's key), and values that do not open
	// under it are ignored. Every worker of the pool needs the same one. "" = the login is not
	// shared through the Coordinator (logged once at OpenAuth): there is no plaintext sharing.
	ShareKey string
	// StoreTimeout bounds one Coordinator call. Default DefaultStoreTimeout (5s). A store that
	// does not answer never stops a refresh: the Auth refreshes alone until it answers again.
	StoreTimeout time.Duration
	// WorkerID names this worker in refresh claims. Default "worker".
	WorkerID string
	// HTTPClient sends refresh requests. Nil = a client of the Auth's own, through ProxyURL.
	HTTPClient *http.Client
	// ProxyURL (validated with egress.Parse) carries the refresh requests of the Auth's own
	// client. Empty = the environment's HTTP(S)_PROXY.
	ProxyURL string
	// Logger receives the lifecycle's log lines (never a token). Nil discards them.
	Logger *slog.Logger
}

// Auth keeps the credentials of one Codex CLI login (an auth.json) valid for as long as the
// worker runs. Open it with OpenAuth, hand it to New as Config.Credentials, Close it after the
// Client. Safe for concurrent use.
//
// An Auth re-reads the file when it changes and after a 401; it refreshes the tokens at the
// token endpoint shortly before the access token expires (5 min before, or at 80% of the life of
// a shorter-lived token) and after a 401 that a re-read did not cure, writes the rotated tokens
// back to the file (atomically, keeping its mode and every other field), and tells the pool. A
// refresh token is single-use, so:
//
//   - only one holder of a login refreshes it at a time: processes on one machine take a lock
//     file beside the auth file, and workers sharing a Coordinator claim the login there by
//     compare-and-set; whoever holds the turn first re-reads both, since another may just have
//     refreshed;
//   - a refresh that timed out or got a garbled answer may have rotated the token: it is retried
//     only after re-reading the file and the Coordinator, with backoff;
//   - a refresh the endpoint refuses for good (refresh_token_reused, _expired, _invalidated,
//     invalid_grant, any 401) takes the account out of service: one log line, a stat, and 401s
//     that say to log in again, until a new login appears in the file or the pool;
//   - a 401 from the origin triggers at most one refresh per 30 s;
//   - a Coordinator that does not answer never stops a refresh: the Auth refreshes alone (once
//     the token has half its refresh lead left, or at once after a 401), says so once per
//     outage, and shares again when the store answers.
//
// The tokens in use are never replaced by less (a failed refresh keeps them; an answer without a
// refresh token keeps the old one), and never appear in a log line or an error.
type Auth struct {
	cfg   AuthConfig
	log   *slog.Logger
	hc    *http.Client
	ownTr *http.Transport // closed by Close when the client is the Auth's own
	seal  *sealer
	key   string // the login's Coordinator key; "" = not shared
	id    string // this Auth's name in claims
	lock  string // the lock file of this machine's holders of the file

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // run and watch
	kick   chan struct{}  // a 401 wants a refresh

	reloadMu sync.Mutex // one reload at a time
	fileMu   sync.Mutex // one write of the file at a time

	mu      sync.Mutex // guards the login in use and the sub-states below
	tok     tokens
	seenAt  time.Time     // when tok was adopted: its start of life when it carries no iat
	changed chan struct{} // closed (and replaced) when tok or down changes, or an attempt ends
	lin     lineage       // which tokens are newer (lineage.go)
	file    fileState     // the login file as last read or written
	outage  outage        // the account out of service: a refresh token refused for good
	sched   refreshSchedule
	share   shareState // the login shared through the pool's Coordinator
	st      schemas.CredentialStats
}

// fileState is what an Auth knows of its login file.
type fileState struct {
	stamp   fileStamp // of the file as last read or written
	badFile fileStamp // the file version that failed to parse, logged once
}

// outage is set when the token endpoint refused the refresh token for good; a new login in the
// file (or from the pool) clears it.
type outage struct {
	down   *schemas.Error
	downRT string // the refresh token that was refused for good
}

// refreshSchedule is when the next refresh may start and what asked for it.
type refreshSchedule struct {
	retryAt   time.Time // no refresh before this (backoff, or another worker refreshing)
	backoff   time.Duration
	kickedFor string    // the access token a 401 asked to refresh
	kickedAt  time.Time // when
	doneFor   string    // the access token a refresh attempt ended on without replacing it
}

// shareState is the login's life in the pool's Coordinator.
type shareState struct {
	claimRev  uint64 // the revision of another worker's claim, and when this Auth first saw it
	claimSeen time.Time
	badRev    uint64 // the revision of the shared value that did not open, logged once
	health    storeHealth
	offering  bool // an offer to the pool is in flight
}

// OpenAuth reads cfg.File and starts keeping its login valid. It fails when the file does not
// hold credentials (the error wraps ErrNoCredentials and fs.ErrNotExist as ResolveCredentials's
// does, and never holds a secret).
func OpenAuth(cfg AuthConfig) (*Auth, error) {
	if cfg.File == "" {
		return nil, fmt.Errorf("%w: AuthConfig.File is empty", ErrNoCredentials)
	}
	path, err := expandHome(cfg.File)
	if err != nil {
		return nil, err
	}
	cfg.File = path
	cfg = cfg.withDefaults()
	t, stamp, err := readAuthFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s does not exist (run `codex login`): %w", ErrNoCredentials, path, fs.ErrNotExist)
	case errors.Is(err, errAuthNoTokens):
		return nil, fmt.Errorf("%w: %s %w", ErrNoCredentials, path, errAuthNoTokens)
	case err != nil:
		return nil, err
	}
	a := &Auth{
		cfg: cfg, seal: newSealer([]byte(cfg.ShareKey)),
		id:   cfg.WorkerID + "/" + rand.Text()[:8],
		lock: filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".lock"),
		kick: make(chan struct{}, 1), changed: make(chan struct{}),
		tok: t, file: fileState{stamp: stamp}, seenAt: time.Now(),
	}
	a.log = cfg.Logger
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.log = a.log.With("account", cfg.Name)
	a.hc = cfg.HTTPClient
	if a.hc == nil {
		a.ownTr = http.DefaultTransport.(*http.Transport).Clone()
		egress.Apply(a.ownTr, cfg.ProxyURL)
		a.hc = &http.Client{Transport: a.ownTr}
	}
	switch {
	case cfg.Coordinator != nil && a.seal == nil:
		a.log.Warn("codex: the login is not shared with the pool: no credentials key is set (CODEXPOOL_CREDENTIALS_KEY or a key file, the same on every worker); this worker refreshes it on its own")
	case cfg.Coordinator != nil:
		a.key = loginKey(t)
	}
	a.st.Shared = a.key != ""
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.wg.Add(1)
	go a.run()
	if a.key != "" {
		a.wg.Add(1)
		go a.watch()
	}
	a.log.Debug("codex: credentials loaded", "file", path, "refreshable", t.RefreshToken != "",
		"expires_at", t.expiry(), "shared", a.key != "")
	return a, nil
}

// withDefaults returns cfg with the documented defaults filled in.
func (cfg AuthConfig) withDefaults() AuthConfig {
	if cfg.Name == "" {
		cfg.Name = "default"
	}
	if cfg.RefreshURL == "" {
		cfg.RefreshURL = DefaultRefreshURL
	}
	if cfg.ClientID == "" {
		cfg.ClientID = DefaultClientID
	}
	if cfg.RefreshTimeout <= 0 {
		cfg.RefreshTimeout = DefaultRefreshTimeout
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultAuthPoll
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "worker"
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	return cfg
}

// Close stops watching and refreshing and waits for the Auth's goroutines. A refresh in flight
// is finished first (at most RefreshTimeout, then StoreTimeout to share its answer): the
// endpoint may have spent the old refresh token already, and its answer holds the only valid
// one. Credentials keeps returning the last tokens. Close is idempotent.
func (a *Auth) Close() error {
	a.cancel()
	a.wg.Wait()
	if a.ownTr != nil {
		a.ownTr.CloseIdleConnections()
	}
	return nil
}

// Credentials returns the credentials to connect with now, or the 401 *schemas.Error of an
// account out of service.
func (a *Auth) Credentials() (Credentials, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.credsLocked()
}

func (a *Auth) credsLocked() (Credentials, error) {
	if a.outage.down != nil {
		e := *a.outage.down
		return Credentials{}, &e
	}
	c := Credentials{Token: a.tok.bearer(), AccountID: a.cfg.AccountID, Source: a.cfg.File}
	if c.AccountID == "" && a.tok.AccessToken != "" {
		c.AccountID = a.tok.AccountID
	}
	return c, nil
}

// Unauthorized re-reads the file and, unless that brought other tokens, asks for a refresh and
// waits for it (at most one per 30 s is triggered by 401s), then returns the credentials to try
// again with, or a 401 *schemas.Error.
func (a *Auth) Unauthorized(ctx context.Context, refused Credentials) (Credentials, error) {
	a.reload()
	for {
		a.mu.Lock()
		cur := a.tok.bearer()
		switch {
		case a.outage.down != nil:
			c, err := a.credsLocked()
			a.mu.Unlock()
			return c, err
		case cur != refused.Token:
			c, err := a.credsLocked()
			a.mu.Unlock()
			return c, err
		case a.tok.RefreshToken == "":
			a.mu.Unlock()
			return Credentials{}, a.refusedError("")
		case a.sched.kickedFor == cur && a.sched.doneFor != cur:
			// A refresh for this token is pending or in flight: wait for it.
		case time.Since(a.sched.kickedAt) < unauthorizedEvery:
			suffix := fmt.Sprintf("; no new refresh for %s", (unauthorizedEvery - time.Since(a.sched.kickedAt)).Round(time.Second))
			a.mu.Unlock()
			return Credentials{}, a.refusedError(suffix)
		default:
			a.sched.kickedFor, a.sched.kickedAt, a.sched.doneFor = cur, time.Now(), ""
			select {
			case a.kick <- struct{}{}:
			default:
			}
		}
		ch := a.changed
		a.mu.Unlock()
		t := time.NewTimer(unauthorizedWait)
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
			return Credentials{}, a.refusedError(fmt.Sprintf("; no refresh finished within %s", unauthorizedWait))
		case <-ctx.Done():
			t.Stop()
			return Credentials{}, ctx.Err()
		}
	}
}

// unauthorizedWait bounds how long a request refused with 401 waits for the refresh it asked for
// (another worker may hold the turn) before it is answered 401.
const unauthorizedWait = 30 * time.Second

func (a *Auth) refusedError(suffix string) *schemas.Error {
	return schemas.Errorf(schemas.CodeUpstreamUnauthorized,
		"codex: origin refused the credentials of account %s (HTTP 401) after a refresh%s", a.cfg.Name, suffix)
}

// Stats returns the counters.
func (a *Auth) Stats() schemas.CredentialStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.st
	st.OutOfService = a.outage.down != nil
	st.StoreDown = a.share.health.down
	st.ExpiresAt = a.tok.expiry()
	return st
}

// broadcastLocked wakes everyone waiting for a change. a.mu is held.
func (a *Auth) broadcastLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// adoptLocked makes t the tokens in use; from says where they came from, for the log. a.mu is held.
func (a *Auth) adoptLocked(t tokens, from string) {
	if t.RefreshToken != a.tok.RefreshToken {
		a.lin.replaced(a.tok.RefreshToken)
	}
	a.tok, a.seenAt = t, time.Now()
	a.sched.retryAt, a.sched.backoff, a.sched.doneFor = time.Time{}, 0, ""
	if a.outage.down != nil && t.RefreshToken != a.outage.downRT {
		a.outage.down = nil
		a.log.Info("codex: account back in service with a new login", "from", from)
	}
	a.broadcastLocked()
}

// goDownLocked takes the account out of service after a refusal with code. a.mu is held.
func (a *Auth) goDownLocked(code, from string) {
	if a.outage.down != nil && a.outage.downRT == a.tok.RefreshToken {
		return
	}
	a.outage.down = schemas.Errorf(schemas.CodeUpstreamUnauthorized,
		"codex: account %s is out of service: its login was refused for good (%s); log in again (`codex login`) and replace %s",
		a.cfg.Name, code, a.cfg.File)
	a.outage.down.UpstreamCode = code
	a.outage.downRT = a.tok.RefreshToken
	a.log.Error("codex: account out of service: the token endpoint refused the login for good; log in again",
		"code", code, "file", a.cfg.File, "from", from)
	a.broadcastLocked()
}

// nextRefresh returns when the tokens should be refreshed; zero for never (nothing to refresh
// with, no expiry to go by, or out of service).
func (a *Auth) nextRefresh() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nextRefreshLocked()
}

// nextRefreshLocked is nextRefresh with a.mu held.
func (a *Auth) nextRefreshLocked() time.Time {
	if a.tok.RefreshToken == "" || a.outage.down != nil {
		return time.Time{}
	}
	if cur := a.tok.bearer(); a.sched.kickedFor == cur && a.sched.doneFor != cur {
		// A 401 asked for a refresh that has not happened yet (another holder had the turn):
		// try again as soon as the back-off allows, not at the token's scheduled time.
		if a.sched.retryAt.After(a.sched.kickedAt) {
			return a.sched.retryAt
		}
		return a.sched.kickedAt // due already
	}
	exp, lead := a.leadLocked()
	if exp.IsZero() {
		return time.Time{}
	}
	at := exp.Add(-lead)
	if a.sched.retryAt.After(at) {
		at = a.sched.retryAt
	}
	return at
}

// leadLocked returns the access token's exp (zero: none) and how long before it the token is
// refreshed. a.mu is held.
func (a *Auth) leadLocked() (time.Time, time.Duration) {
	exp := a.tok.expiry()
	if exp.IsZero() {
		return exp, 0
	}
	born := parseClaims(a.tok.AccessToken).issued()
	if born.IsZero() || !born.Before(exp) {
		born = a.seenAt
	}
	return exp, min(refreshLead, exp.Sub(born)/5)
}

// run reloads, schedules and performs refreshes until Close.
func (a *Auth) run() {
	defer a.wg.Done()
	poll := time.NewTicker(a.cfg.Poll)
	defer poll.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Stop()
		var due <-chan time.Time
		if next := a.nextRefresh(); !next.IsZero() {
			timer.Reset(time.Until(next))
			due = timer.C
		}
		a.mu.Lock()
		changed := a.changed
		a.mu.Unlock()
		select {
		case <-a.ctx.Done():
			return
		case <-poll.C:
			a.reload()
		case <-changed: // new tokens (from the pool): reschedule
		case <-due:
			a.refresh(false)
		case <-a.kick:
			a.refresh(true)
		}
	}
}

// reload reads the file if it changed and adopts its tokens unless they are ours or an older
// state (a refresh token seen replaced): a change of the file (a `codex login`) always wins,
// whatever its tokens' exp, and is offered to the pool.
func (a *Auth) reload() {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	fi, err := statFile(a.cfg.File)
	if err != nil {
		return // gone or unreadable for now: keep what we have
	}
	a.mu.Lock()
	same := stampOf(fi) == a.file.stamp
	a.mu.Unlock()
	if same {
		return
	}
	t, stamp, err := readAuthFile(a.cfg.File)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if st := stampOf(fi); st != a.file.badFile {
			a.file.badFile = st
			a.log.Warn("codex: auth file changed but holds no usable login; keeping the current one", "error", err)
		}
		return
	}
	a.file.stamp = stamp
	if !t.same(a.tok) && !a.lin.isSpent(t.RefreshToken) {
		a.st.Reloads++
		a.adoptLocked(t, "file")
		a.log.Info("codex: new tokens read from the auth file", "file", a.cfg.File, "expires_at", t.expiry())
		a.offerLocked() // tell the pool, off the caller's goroutine
	}
}

func or(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// busy puts the next attempt off briefly: another holder of the login is refreshing it.
func (a *Auth) busy() {
	a.mu.Lock()
	a.sched.retryAt = time.Now().Add(busyRetry)
	a.mu.Unlock()
}

// failed records a failed attempt and backs off. The next attempt re-reads the file and the pool
// first, which matters most when uncertain (the endpoint may have rotated the token).
func (a *Auth) failed(cur tokens, uncertain bool, msg string) {
	a.mu.Lock()
	a.st.RefreshFailures++
	a.sched.backoff = min(max(2*a.sched.backoff, minBackoff), maxBackoff)
	a.sched.retryAt = time.Now().Add(a.sched.backoff)
	wait := a.sched.backoff
	a.mu.Unlock()
	if uncertain {
		a.log.Warn("codex: token refresh failed; the token endpoint may have rotated the token, so the file and the pool are re-read before the next try",
			"error", msg, "retry_in", wait)
	} else {
		a.log.Warn("codex: token refresh failed", "error", msg, "retry_in", wait)
	}
	a.attemptEnded(cur.bearer(), true)
}

// attemptEnded wakes the 401s waiting for the attempt; tried says a refresh request was made
// (or refused to be made) for the token before, so a 401 for it is final.
func (a *Auth) attemptEnded(before string, tried bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tried && a.tok.bearer() == before {
		a.sched.doneFor = before
	}
	if !tried && a.sched.kickedFor == before && a.tok.bearer() == before && a.outage.down == nil && a.tok.RefreshToken != "" {
		return // nothing changed and nothing was tried: the waiters keep waiting for the refresh
	}
	a.broadcastLocked()
}

// writeFile writes t to the auth file, unless it holds them already or tokens this Auth does not
// know (neither the ones in use nor a state seen replaced): a new login, which the next poll
// adopts. A read-only file (a mounted secret) is fine: the tokens live on in memory and in the
// pool.
func (a *Auth) writeFile(t tokens) {
	a.fileMu.Lock()
	defer a.fileMu.Unlock()
	if ft, _, err := readAuthFile(a.cfg.File); err == nil {
		a.mu.Lock()
		unknown := !ft.same(a.tok) && !a.lin.isSpent(ft.RefreshToken)
		a.mu.Unlock()
		if ft.same(t) || unknown {
			return
		}
	}
	if err := writeAuthFile(a.cfg.File, t); err != nil {
		a.log.Warn("codex: cannot write the refreshed tokens to the auth file; they are kept in memory", "file", a.cfg.File, "error", err)
		return
	}
	if fi, err := statFile(a.cfg.File); err == nil {
		a.mu.Lock()
		if a.tok.same(t) { // else the next poll reads it back: the same tokens, once adopted
			a.file.stamp = stampOf(fi) // our own write is no news for the poll
		}
		a.mu.Unlock()
	}
}
