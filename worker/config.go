package worker

import (
	"time"

	"github.com/codexpool/codexpool/gate"
)

// Defaults of Config.
const (
	// DefaultModel is the model of requests that name none, when Config.Model is empty.
	DefaultModel = "gpt-5.1-codex"
	// DefaultCooldown is how long an account the origin refused stays out when the origin did not
	// say until when.
	DefaultCooldown = 30 * time.Second
	// DefaultAffinityKeys is how many prompt cache keys a worker remembers the account of.
	DefaultAffinityKeys = 10000
	// DefaultStickyWait is how long a generation waits for its session's account to take it.
	DefaultStickyWait = 5 * time.Second
	// DefaultStickyRefresh is how old a session's binding gets before a generation that uses it
	// writes it again (restarting the store's TTL).
	DefaultStickyRefresh = time.Minute
	// DefaultAccountQueueTimeout is how long a generation waits for a slot of an account at its
	// MaxConcurrent (that account or another) before it is answered worker_busy.
	DefaultAccountQueueTimeout = 30 * time.Second
	// DefaultAccountName is the name of the account the one-account shortcut makes.
	DefaultAccountName = "default"
)

// Config configures a Worker. The zero value of every field is its documented default; a Worker
// needs credentials: Accounts, or Token, or an AuthFile to read them from.
type Config struct {
	ID    string // the worker's id in logs; default "worker"
	Model string // model used when a request names none; default DefaultModel
	URL   string // the Codex origin, http(s) or ws(s); default codex.DefaultURL

	// Accounts are the accounts the worker generates with, each with its own gate, socket pool,
	// usage limits and cooldown (see Account and Worker.Generate). Names must be unique.
	//
	// Empty = the one-account shortcut: Token (with AccountID) wins; without it the Codex CLI
	// login in AuthFile ("~" expanded) is read. The shortcut makes one account named
	// DefaultAccountName, whose usage is recorded but never keeps a request from the origin, as
	// before accounts existed. Token, AccountID and AuthFile are ignored when Accounts is set.
	// Secret values never reach a log or an error.
	Accounts  []Account
	Token     string
	AccountID string
	AuthFile  string

	// The lifecycle of an AuthFile login (login.AuthConfig): the token endpoint and client id
	// (defaults login.DefaultRefreshURL, login.DefaultClientID) and the secret that seals the
	// tokens shared through Options.Coordinator ("" = plaintext).
	RefreshURL     string
	ClientID       string
	CredentialsKey string
	// ProxyURL is the pool's default proxy (CODEXPOOL_PROXY_URL), for accounts without their own.
	ProxyURL string
	// WSRetryAfter: after a 426 the origin is spoken to over HTTP this long; default
	// codex.DefaultWSRetryAfter.
	WSRetryAfter time.Duration

	Gate    gate.Config // pacing of new upstream connections, per account; the zero value is the adaptive gate
	Policy  gate.Policy // the connect policy around the gate (403 cooldown, per-attempt timeout)
	NoReuse bool        // open a socket per generation instead of pooling completed ones

	MaxIdleSockets int           // idle pooled sockets kept per account; default codex.DefaultMaxIdle
	IdleTimeout    time.Duration // longest wait for an upstream event; default codex.DefaultIdleTimeout

	// Cooldown is how long an account stays out after the origin refused it for its limits or
	// its credentials without a retry time; default DefaultCooldown. A refusal with a time
	// (resets_at, resets_in_seconds, Retry-After) cools down until then.
	Cooldown time.Duration
	// AffinityKeys bounds how many sessions the worker remembers the account of when
	// Options.Bindings is nil (least recently used forgotten first); default DefaultAffinityKeys.
	AffinityKeys int

	// Sticky routing (see Worker.Generate). NoSticky routes every generation by headroom alone.
	// StickyWait is the longest a generation waits for its session's busy account before it
	// runs on another (the binding stays); default DefaultStickyWait. StickyRefresh is the age
	// at which a used binding is written again; keep it well below the store's TTL; default
	// DefaultStickyRefresh.
	NoSticky      bool
	StickyWait    time.Duration
	StickyRefresh time.Duration

	// AccountQueueTimeout is the longest a generation waits for a slot when the accounts it may
	// use are at their MaxConcurrent; then it is answered 429 worker_busy (retry after 1 s).
	// Default DefaultAccountQueueTimeout.
	AccountQueueTimeout time.Duration

	// SessionIdleTimeout is how long a session (schemas.Request.Session) keeps its reserved
	// upstream socket without a turn; default DefaultSessionIdleTimeout.
	SessionIdleTimeout time.Duration
	// MaxSessions is how many sessions the worker owns at most (see session.go); default
	// DefaultMaxSessions.
	MaxSessions int
}

// Account is one set of Codex credentials of a Worker (Config.Accounts). ParseAccounts and
// LoadAccounts read them from an accounts file.
type Account struct {
	// Name identifies the account in logs, metrics, stats and errors; required, unique.
	Name string
	// Token is the bearer token (API key or ChatGPT access token). When empty, the Codex CLI
	// login in AuthFile is read.
	Token string
	// AccountID is sent as ChatGPT-Account-Id; with an AuthFile it defaults to the login's.
	AccountID string
	// AuthFile is a Codex CLI auth.json ("~" expanded), read when Token is empty.
	AuthFile string
	// MaxUsedPercent keeps the account out once the origin reports this share (percent) of any
	// usage window used, until that window resets; 0 = 100. Near it the account runs one
	// generation at a time, so it overshoots by at most one generation per worker.
	MaxUsedPercent float64
	// MaxConcurrent caps the account's generations running at once across the whole pool
	// (through Options.Slots; without it, in this worker); 0 = no cap.
	MaxConcurrent int
	// ProxyURL carries every byte the account sends (upgrades, HTTP fallback, token refresh):
	// http://, https://, socks5://, socks5h://, optional user:password. Empty = Config.ProxyURL.
	ProxyURL string

	// source names where Token came from (e.g. "env CODEX_TOKEN_A"), for logs; ParseAccounts
	// sets it.
	source string
}
