package codex

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/internal/egress"
	"github.com/codexpool/codexpool/worker/codex/login"
)

// Defaults of Config.
const (
	DefaultURL        = "https://chatgpt.com/backend-api/codex/responses"
	DefaultMaxIdle    = 256
	DefaultMaxAge     = 55 * time.Minute
	DefaultIdleExpiry = 4 * time.Minute
	// DefaultPingInterval is how often idle pooled and pinned sockets are pinged.
	DefaultPingInterval = 30 * time.Second
	DefaultIdleTimeout  = 5 * time.Minute
	DefaultVersion      = "dev"
	// DefaultWSRetryAfter is how long a client that met a 426 speaks HTTP before it tries a
	// WebSocket again.
	DefaultWSRetryAfter = 10 * time.Minute
)

// BetaHeader is the OpenAI-Beta value that selects the Responses WebSocket protocol.
const BetaHeader = "responses_websockets=2026-02-06"

// Originator is sent in the originator header and the User-Agent.
const Originator = "codexpool"

// Config configures a Client. Zero values are the documented defaults; credentials are required:
// Credentials, or a Token.
type Config struct {
	// URL is the origin. http(s):// becomes ws(s)://; ws(s):// is used as it is. HTTP streaming
	// (after a 426) posts to the same URL with http(s). Default DefaultURL.
	URL string
	// Credentials gives the credentials of every new connection and handles 401s: an *Auth
	// keeps a Codex CLI login fresh. Nil = Token and AccountID, fixed.
	Credentials login.TokenSource
	// Token is the bearer token (API key or ChatGPT access token) when Credentials is nil; see
	// ResolveCredentials.
	Token string
	// AccountID is sent as ChatGPT-Account-Id when set (with Token).
	AccountID string
	// Gate paces new upgrades. Nil means gate.New(gate.Config{Mode: gate.Off}).
	Gate *gate.Gate
	// Policy is the connect policy around the gate (403 cooldown, per-attempt timeout).
	Policy gate.Policy
	// NoReuse makes every generation open (and close) its own socket. Default false: sockets are
	// pooled after response.completed.
	NoReuse bool
	// MaxIdle bounds the idle pooled sockets; the least recently used one is closed first.
	// Default DefaultMaxIdle (256).
	MaxIdle int
	// MaxAge: a socket older than this is not leased again (the origin ends sockets after 60 min).
	// Default DefaultMaxAge (55m).
	MaxAge time.Duration
	// IdleExpiry: an idle pooled socket unused this long is closed. Default DefaultIdleExpiry (4m).
	IdleExpiry time.Duration
	// PingInterval: idle pooled sockets and the sockets pinned to sessions between their turns
	// get a WebSocket ping this often, so that proxies and NATs on the way do not drop them as
	// silent. Default DefaultPingInterval (30s).
	PingInterval time.Duration
	// ProxyURL sends every byte of this client (upgrades, HTTP fallback) through a proxy:
	// http://, https:// (CONNECT), socks5:// or socks5h://, optional user:password. Empty = none
	// (the environment's HTTP(S)_PROXY as before).
	ProxyURL string
	// IdleTimeout is the longest wait for the first event and between events (also bounds the
	// write of the request). Default DefaultIdleTimeout (5m).
	IdleTimeout time.Duration
	// WSRetryAfter: after the origin answers an upgrade with 426 (no WebSockets here), new
	// generations use HTTP streaming for this long, then try a WebSocket again.
	// Default DefaultWSRetryAfter (10m).
	WSRetryAfter time.Duration
	// Version is sent as the version header and in the User-Agent. Default DefaultVersion ("dev").
	Version string
	// Logger receives debug logs. Nil discards them. The token is never logged.
	Logger *slog.Logger
	// OnLimits, when set, receives every usage report of the origin: the rate-limit headers of
	// each successful upgrade and each codex.rate_limits event (see ParseLimitHeaders,
	// ParseLimitsEvent). It is called on the dialing or generation goroutine and must not block.
	// Nil = reports are ignored.
	OnLimits func(Limits)
}

// withDefaults returns cfg with defaults filled in and the URL normalised, or an error.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Credentials == nil && cfg.Token == "" {
		return cfg, fmt.Errorf("%w: no token configured (Config.Token and Config.Credentials are empty; see ResolveCredentials)", login.ErrNoCredentials)
	}
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	if cfg.ProxyURL != "" {
		if _, err := egress.Parse("proxy_url", cfg.ProxyURL); err != nil {
			return cfg, err
		}
	}
	u, err := wsURL(cfg.URL)
	if err != nil {
		return cfg, err
	}
	cfg.URL = u
	if cfg.Gate == nil {
		cfg.Gate = gate.New(gate.Config{Mode: gate.Off})
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = DefaultMaxIdle
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.IdleExpiry <= 0 {
		cfg.IdleExpiry = DefaultIdleExpiry
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.WSRetryAfter <= 0 {
		cfg.WSRetryAfter = DefaultWSRetryAfter
	}
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// httpURL turns a ws(s) origin URL into its http(s) form, for HTTP streaming.
func httpURL(ws string) string {
	if rest, ok := strings.CutPrefix(ws, "wss://"); ok {
		return "https://" + rest
	}
	return "http://" + strings.TrimPrefix(ws, "ws://")
}

// wsURL turns an http(s) or ws(s) origin URL into its ws(s) form.
func wsURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("codex: bad origin URL: %w", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("codex: origin URL %q: scheme must be http, https, ws or wss", u.Redacted())
	}
	if u.Host == "" {
		return "", fmt.Errorf("codex: origin URL %q has no host", u.Redacted())
	}
	return u.String(), nil
}
