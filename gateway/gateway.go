package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/gateway/anthropic"
	"github.com/codexpool/codexpool/internal/tracing"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// Defaults of Config.
const (
	DefaultModel           = "gpt-5.1-codex"
	DefaultKeepAlive       = 15 * time.Second
	DefaultRequestTimeout  = 10 * time.Minute
	DefaultBodyTimeout     = time.Minute
	DefaultLongWait        = 10 * time.Second
	DefaultReadyTTL        = 2 * time.Second
	DefaultReadyTimeout    = time.Second
	DefaultWriteTimeout    = 30 * time.Second
	DefaultUnavailableWait = 3 * time.Second
)

// Config configures a Gateway. The zero value of every field is its documented default.
type Config struct {
	// Keys are the client keys accepted as "Authorization: Bearer <key>" on /v1/*. Empty means no
	// authentication: then the gateway must listen on loopback only (see CheckAddr).
	Keys []string
	// ClientKeys are keys with names, limits and rights (the keys file, see ParseKeys),
	// accepted next to Keys. Keys and ClientKeys both empty means no authentication.
	ClientKeys []Key
	// LiveKeys are the keys of the keys bucket (WatchKeys), accepted next to Keys and ClientKeys
	// and applied as they change: an entry replaces the ClientKeys key of the same name, and a
	// revoked name revokes it too. Once the bucket has held an entry the gateway asks for keys,
	// even after the last one is revoked. Nil: none.
	LiveKeys *LiveKeys
	// Meter records each request's usage and enforces the keys' limits; nil: neither.
	Meter Meter
	// Quota is the pool's usage, sent as x-codex-primary-* / x-codex-secondary-* headers on
	// generation replies and served by GET /backend-api/wham/usage and /api/codex/usage; nil:
	// no headers, and those routes answer with no windows.
	Quota QuotaSource
	// Models are listed by GET /v1/models; default [DefaultModel]. Requests may name any model:
	// the workers decide.
	Models []string
	// MaxBodyBytes bounds a request body (413 above it); default the NATS server's max payload.
	MaxBodyBytes int64
	// BodyTimeout bounds reading one request body; default 1m. (The server has no ReadTimeout:
	// net/http cancels a request's context when it fires, which would end long streams.)
	BodyTimeout time.Duration
	// KeepAlive is the gap after which a silent stream gets an SSE comment (": keep-alive") so
	// proxies and clients do not time it out; default 15s. A stream whose first event is that
	// late starts with the comment, so a later error comes as an SSE error event, not a status.
	// A WebSocket (GET /v1/responses) gets a ping every KeepAlive, and is closed when its client
	// sent nothing, not even a pong, for 3 of them.
	KeepAlive time.Duration
	// WriteTimeout is how long one write of a stream (an event, a keep-alive) may wait for a
	// client that does not read: past it the client is cut off and its pool request cancelled,
	// so a stalled reader does not hold a worker's slot. Default 30s.
	WriteTimeout time.Duration
	// RequestTimeout is the longest a request may take; it becomes the pool request's deadline
	// (Codex-Timeout). Default 10m.
	RequestTimeout time.Duration
	// UnavailableWait is how long a request waits for a NATS connection that is down (for a
	// reconnect) before it is answered 503 unavailable with retry-after, instead of waiting for
	// its RequestTimeout; a request in flight when the connection drops ends the same way.
	// Default 5s.
	UnavailableWait time.Duration
	// LongWait: a 429 upstream_rate_limited whose retry time is unknown or longer than this is
	// answered with x-should-retry: false, so the SDKs do not retry it on their own; default 10s.
	LongWait time.Duration
	// ReadyTTL is how long a /readyz verdict is reused, so probes do not flood NATS; default 2s.
	ReadyTTL time.Duration
	// ReadyTimeout bounds the micro ping of /readyz; default 1s.
	ReadyTimeout time.Duration
	// ModelMap maps the model names of /v1/messages requests that Models does not list (e.g.
	// claude-*) to pool models; default: every such name to the workers' default model.
	ModelMap anthropic.ModelMap
	// Jobs serves "background": true; nil refuses it with 400 (param "background").
	Jobs Jobs
	// Dashboard serves GET /dashboard and /dashboard/* (package gateway/dashboard) to callers
	// with a key, as Authorization: Bearer or as the password of HTTP Basic authentication (which
	// a browser asks for), or, without keys, to loopback callers as /v1/* (see localOnly). Nil:
	// those paths are 404.
	Dashboard http.Handler
	// Logger gets one line per request (message "request") and, at debug, request bodies.
	// Default: discard.
	Logger *slog.Logger
	// TracerProvider makes a span per request (trace.go), whose trace the pool requests carry on;
	// nil: none, while a client's traceparent is still passed on to the pool.
	TracerProvider trace.TracerProvider
}

// Gateway is the HTTP front door of the pool: an http.Handler serving the OpenAI Responses API
// (POST /v1/responses, GET /v1/responses/{id}), GET /v1/models, /healthz and /readyz. It keeps
// no state of its own beyond a cached readiness verdict, so several can run behind a load
// balancer. Make one with New; it is safe for concurrent use.
type Gateway struct {
	cl *client.Client
	// hints are the workers the sessions used last (stickyworker.go).
	hints  workerHints
	nc     *nats.Conn
	cfg    Config
	log    *slog.Logger
	keys   *keys // keys.go
	tracer trace.Tracer
	recent recentLog // recent.go

	mux    *http.ServeMux // routes.go
	models []byte         // the GET /v1/models body
	ready  readiness
}

// New returns a Gateway that sends requests through cl; nc is cl's connection, used for
// /readyz (connection state and micro ping) and the default body limit.
func New(cl *client.Client, nc *nats.Conn, cfg Config) *Gateway {
	if len(cfg.Models) == 0 {
		cfg.Models = []string{DefaultModel}
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = nc.MaxPayload()
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.UnavailableWait <= 0 {
		cfg.UnavailableWait = DefaultUnavailableWait
	}
	if cfg.LongWait <= 0 {
		cfg.LongWait = DefaultLongWait
	}
	if cfg.ReadyTTL <= 0 {
		cfg.ReadyTTL = DefaultReadyTTL
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cl: cl, nc: nc, cfg: cfg, log: cfg.Logger.With("component", "gateway"), tracer: tracing.Tracer(cfg.TracerProvider)}
	g.keys = newKeys(cfg.Keys, cfg.ClientKeys, cfg.LiveKeys)
	g.models = modelList(cfg.Models)
	g.mux = g.routes()
	return g
}

// outcome is what a handler answered, for the request's log line.
type outcome struct {
	status int
	code   schemas.Code // "ok" on success
	stream bool
	err    string // the message of an error answer
	// upstream is the origin's own error code, when there is one.
	upstream string
	quiet    bool // logged at debug: a dashboard's polls
}

func ok(status int) outcome { return outcome{status: status, code: "ok"} }

func failed(a *apiError) outcome {
	return outcome{status: a.Status, code: a.Code, err: a.Message, upstream: a.UpstreamCode}
}

// ServeHTTP routes the request and writes the one log line per request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// A stream's write deadline outlives its response on a kept-alive connection: lift it.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	// The pool's request id is always the gateway's own: a client-chosen one could name another
	// client's request, and a disconnect cancels the request by its id.
	c := g.identify(r)
	w.Header().Set("X-Request-Id", c.id)
	ctx, span := g.startSpan(r, c)
	if g.cfg.Meter != nil {
		ctx = g.metered(ctx, c.key)
	}
	r = r.WithContext(ctx)
	o := g.serveRoute(w, r, c)
	if r.Context().Err() != nil && o.code != "ok" {
		o.status, o.code = StatusClientClosed, CodeClientClosed
	}
	endSpan(span, o)
	took := time.Since(start)
	if remembered(r.URL.Path) {
		g.remember(c, r, o, start, took, span)
	}
	level := slog.LevelInfo
	if o.status >= 500 {
		level = slog.LevelWarn
	} else if o.quiet {
		level = slog.LevelDebug
	}
	if !g.log.Enabled(r.Context(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", c.id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", o.status), slog.String("code", string(o.code)),
		slog.Duration("duration", took), slog.Bool("stream", o.stream),
	}
	if c.key != nil {
		attrs = append(attrs, slog.String("key", c.key.Name)) // its name: never the secret
	}
	if o.err != "" {
		attrs = append(attrs, slog.String("error", o.err))
	}
	if o.upstream != "" {
		attrs = append(attrs, slog.String("upstream_code", o.upstream))
	}
	// The log call must not use r.Context(): it is done when the client has gone. Its context
	// holds the span's ids alone (trace_id and span_id on the line).
	g.log.LogAttrs(trace.ContextWithSpanContext(context.Background(), span.SpanContext()), level, "request", attrs...)
}

// call is who a request came from and the id the gateway gave it.
type call struct {
	id     string
	owner  owner
	authed bool // a key the gateway accepts, or a gateway without keys
	key    *Key // the key that matched; nil without keys
}

// identify authenticates r and makes its request id, which carries the owner (see owner.go).
func (g *Gateway) identify(r *http.Request) call {
	o, k, authed := g.authorize(r)
	return call{id: newRequestID(o), owner: o, authed: authed, key: k}
}

func (g *Gateway) notFound(w http.ResponseWriter, r *http.Request) outcome {
	a := newAPIError(http.StatusNotFound, CodeNotFound, "", "gateway: no route for "+r.Method+" "+r.URL.Path)
	a.write(w)
	return failed(a)
}

func (g *Gateway) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) outcome {
	w.Header().Set("Allow", allow)
	a := newAPIError(http.StatusMethodNotAllowed, CodeMethod, "", "gateway: "+r.URL.Path+" takes "+allow+", not "+r.Method)
	a.write(w)
	return failed(a)
}

// authorize reports whether r carries one of the keys (as Authorization: Bearer, or x-api-key
// on /v1/messages), which one, and the owner it makes r's: the key's SHA-256 digest. Keys are
// compared in constant time on SHA-256 digests (see keyring.match). Without keys every request
// is the zero owner's.
func (g *Gateway) authorize(r *http.Request) (owner, *Key, bool) {
	ks := g.keys.now()
	if !ks.keyed {
		return owner{}, nil, true
	}
	sum, found := bearer(r)
	if k := r.Header.Get("X-Api-Key"); !found && k != "" && anthropicPath(r.URL.Path) {
		sum, found = sha256.Sum256([]byte(k)), true
	}
	k := ks.ring.match(sum)
	if !found || k == nil {
		return owner{}, nil, false
	}
	return owner(sum), k, true
}

// anthropicPath reports whether an Anthropic client may send its key as x-api-key on path.
func anthropicPath(p string) bool {
	return strings.HasPrefix(p, "/v1/messages") || p == "/v1/models" || strings.HasPrefix(p, "/v1/models/")
}

// ErrOpenWithoutKeys is returned by CheckAddr for a non-loopback address without client keys.
var ErrOpenWithoutKeys = errors.New("gateway: without client keys the gateway listens on loopback only")
