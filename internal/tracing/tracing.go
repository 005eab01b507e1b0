// Package tracing is the pool's OpenTelemetry tracing: the W3C trace context carried in NATS
// headers and HTTP headers, child spans that follow their parent's provider, and the trace_id /
// span_id of a request's log lines. Package export starts the exporter.
//
// Only the roots of a process's spans (the gateway's HTTP request, the worker's NATS request or
// job) are started from a configured provider; everything below them calls [Start], which takes
// the provider of the span in its context. A library package therefore needs no provider of its
// own, and with tracing off (no endpoint) every span is a no-op that still carries an incoming
// trace id, so that logs and replies keep it.
//
// No span attribute ever holds a prompt, an answer or a secret: the attributes are route, model,
// key name, worker, account name, request id, status and error code.
package tracing

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of every span the pool starts.
const Scope = "github.com/codexpool/codexpool"

// Start starts a child span of the span in ctx, from that span's provider. Under a span that is
// not recorded (tracing off, or a trace the sampler dropped) it starts nothing and returns ctx
// and that span: no sampler the SDK offers records a child of a local span it dropped (the
// parent-based ones follow the parent, the ratio one decides by the trace id, which the child
// shares), so the SDK's work per span (ids, sampler, a context) is skipped where it would make
// a span nobody sees. Log lines below it name the parent's span id, and the trace id is kept.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, opts...)
}

// Recording reports whether ctx's span is recorded, for callers that would build attributes
// only for a span that keeps them.
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// Since starts a child span that began at start (a wait measured before the span could be made).
func Since(ctx context.Context, name string, start time.Time, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return Start(ctx, name, append(opts, trace.WithTimestamp(start))...)
}

// propagator is the W3C trace context: traceparent and tracestate.
var propagator = propagation.TraceContext{}

// InjectHTTP writes ctx's trace context into HTTP headers.
func InjectHTTP(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// ExtractHTTP returns ctx with the remote trace context of an HTTP request's headers, if any.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// IDs are the trace and span id of ctx's span as hex, "" without one.
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

// Tracer is the pool's tracer of tp; nil is tracing off.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(Scope)
}

// natsCarrier reads and writes trace context in NATS headers. Its keys are the lower-case W3C
// names ("traceparent", "tracestate"); a client that wrote them in another case is read too.
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

func (c natsCarrier) Set(key, value string) {
	for k := range c {
		if strings.EqualFold(k, key) {
			delete(c, k)
		}
	}
	c[key] = []string{value}
}

func (c natsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// InjectNATS writes ctx's trace context into NATS message headers (h must not be nil). Without a
// valid span in ctx it writes nothing.
func InjectNATS(ctx context.Context, h nats.Header) { propagator.Inject(ctx, natsCarrier(h)) }

// ExtractNATS returns ctx with the remote trace context of a NATS message's headers, if any.
func ExtractNATS(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return propagator.Extract(ctx, natsCarrier(h))
}

// LogHandler adds trace_id and span_id to each record logged with a context that holds a span,
// so that every log line of a request names its trace.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }
