package codextest

import "time"

// DefaultWords is the answer length when Options.Words is 0.
const DefaultWords = 8

// Options configure a Server. The zero value is a healthy, instant, unlimited origin that answers
// with DefaultWords words.
type Options struct {
	// Latency is the time from response.create to response.completed. 0 = instant.
	Latency time.Duration
	// TTFT is the time to the first response.output_text.delta; it is raised to Latency when it
	// exceeds it. 0 spaces the deltas evenly: with Latency L and W words, delta i comes at
	// (i+1)·L/(W+1) and response.completed at L. With TTFT > 0 the first delta comes at TTFT and
	// the rest, then the completion, are spaced evenly up to Latency.
	TTFT time.Duration
	// Words is the answer length in words. 0 = DefaultWords.
	Words int
	// UpgradeRate is how many new upgrades per second the token bucket accepts; above it upgrades
	// get 403. 0 = unlimited.
	UpgradeRate float64
	// UpgradeBurst is the bucket size. 0 = max(1, ceil(UpgradeRate)).
	UpgradeBurst int
	// RetryAfter is sent (whole seconds, rounded up) as Retry-After with rate-limit 403s.
	// 0 = header absent.
	RetryAfter time.Duration
	// MaxConns caps concurrently open sockets; upgrades above it get 503. 0 = unlimited.
	MaxConns int
	// MaxConnAge is a socket's lifetime. At expiry the server sends the error event
	// {"type":"error","status":400,"error":{"type":"invalid_request_error",
	// "code":"websocket_connection_limit_reached",...}}, then a Close frame, and closes the socket,
	// even while a response is in flight. 0 = never.
	MaxConnAge time.Duration
	// Token, when set, makes upgrades and HTTP streaming requests whose Authorization header is
	// not "Bearer "+Token fail with 401 and a JSON body (which never echoes the header). It is
	// ignored when Accounts is set.
	Token string
	// Accounts, when set, are the accounts the server serves (see [Account]): every upgrade and
	// HTTP request must carry a bearer token of one of them (its static Token or an access token
	// issued by Logins.Issue or a refresh), else 401; Token is then ignored. Each account has its
	// own upgrade bucket and usage windows, reported in x-codex-* headers and codex.rate_limits
	// events. nil = no accounts: one anonymous origin, checked against Token only.
	Accounts []Account
	// TokenLifetime is the lifetime of issued access tokens (rounded up to whole seconds in their
	// exp). 0 = DefaultTokenLifetime (1h).
	TokenLifetime time.Duration
	// RefreshLatency delays every answer of the token endpoint. The refresh token is spent when
	// the request arrives, so a client that gives up before the answer has lost it. 0 = none.
	RefreshLatency time.Duration
	// WSOff answers every upgrade with 426 upgrade_required, as an origin without WebSockets
	// does, while HTTP streaming keeps working; [Limits.SetWSOff] switches it at run time.
	// false = WebSockets on.
	WSOff bool
	// ToolCalls are the function calls a request is answered with when the last user message
	// has no [sim:tool ...] directive and the input sends no tool results back (see
	// [ParseToolCall]); each must be declared in the request's tools. nil = answer with text.
	ToolCalls []ToolCall
	// NoPromptCache switches the per-account prompt cache off: usage.input_tokens_details.
	// cached_tokens is then always 0. false = a repeated prefix of the serialized input (at least
	// 256 bytes) within one account is reported as cached.
	NoPromptCache bool
	// Strict refuses, as the real origin does, a request with a top-level field the origin does
	// not accept (metadata, temperature, top_p, max_output_tokens, unknown names): an error event
	// (WebSocket) or a 400 (HTTP) with code unsupported_parameter naming the field. The metadata
	// overrides (sim_fault, …) are then unavailable. false = unknown fields are ignored.
	Strict bool
	// Logf, when set, receives one line per notable event (rejections, faults). nil = silent.
	Logf func(format string, args ...any)
}

func (o Options) words() int {
	if o.Words <= 0 {
		return DefaultWords
	}
	return o.Words
}
