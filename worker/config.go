package worker

import (
	"time"

	"github.com/codexpool/codexpool/gate"
)

// DefaultModel is the model of requests that name none, when Config.Model is empty.
const DefaultModel = "gpt-5.1-codex"

// Config configures a Worker. The zero value of every field is its documented default; a Worker
// needs credentials: Token, or an AuthFile to read them from.
type Config struct {
	ID    string // the worker's id in logs; default "worker"
	Model string // model used when a request names none; default DefaultModel
	URL   string // the Codex origin, http(s) or ws(s); default codex.DefaultURL

	// Credentials: Token (with AccountID) wins; without it the Codex CLI login in AuthFile
	// ("~" expanded) is read. Secret values never reach a log or an error.
	Token     string
	AccountID string
	AuthFile  string

	// The lifecycle of an AuthFile login (codex.AuthConfig): the token endpoint and client id
	// (defaults codex.DefaultRefreshURL, codex.DefaultClientID) and the secret that seals the
	// tokens shared through Options.Coordinator ("" = plaintext).
	RefreshURL     string
	ClientID       string
	CredentialsKey string
	// WSRetryAfter: after a 426 the origin is spoken to over HTTP this long; default
	// codex.DefaultWSRetryAfter.
	WSRetryAfter time.Duration

	Gate    gate.Config // pacing of new upstream connections; the zero value is the adaptive gate
	Policy  gate.Policy // the connect policy around the gate (403 cooldown, per-attempt timeout)
	NoReuse bool        // open a socket per generation instead of pooling completed ones

	MaxIdleSockets int           // idle pooled sockets kept; default codex.DefaultMaxIdle
	IdleTimeout    time.Duration // longest wait for an upstream event; default codex.DefaultIdleTimeout
}
