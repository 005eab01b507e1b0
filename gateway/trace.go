package gateway

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"
)

// A request's span: the root of the gateway's part of its trace, or the child of the
// traceparent an HTTP client sent. It is named by the route that served it ("POST /v1/messages")
// and carries the key's name (never the secret), the model the pipeline sends to the pool and
// how it ended; the pool request below it (queue/client) carries the trace on in NATS headers.

// startSpan starts the span of r, adopting the client's trace context.
func (g *Gateway) startSpan(r *http.Request, c call) (context.Context, trace.Span) {
	ctx := tracing.ExtractHTTP(r.Context(), r.Header)
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
		attribute.String("codexpool.request_id", c.id),
	}
	if c.key != nil {
		attrs = append(attrs, attribute.String("codexpool.key", c.key.Name))
	}
	return g.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// nameSpan names r's span by the route the mux chose for it.
func nameSpan(r *http.Request) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() || r.Pattern == "" {
		return
	}
	route := r.Pattern
	if !strings.Contains(route, " ") {
		route = r.Method + " " + route
	}
	span.SetName(route)
	span.SetAttributes(attribute.String("http.route", route[strings.Index(route, " ")+1:]))
}

// spanModel records the model a request sends to the pool on its span.
func spanModel(ctx context.Context, model string) {
	if model != "" {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("gen_ai.request.model", model))
	}
}

// endSpan ends a request's span with its outcome.
func endSpan(span trace.Span, o outcome) {
	span.SetAttributes(attribute.Int("http.response.status_code", o.status), attribute.String("codexpool.code", string(o.code)))
	if o.status >= 500 {
		span.SetStatus(codes.Error, o.err)
	}
	span.End()
}
