package client

import (
	"context"
	"errors"
	"io"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"
	"github.com/codexpool/codexpool/schemas"
)

// A request's span: "request <subject>" (a job's "submit <subject>") under the span in the
// caller's context, started from that span's provider, so a caller without a span makes none.
// Its trace context goes out in the message's traceparent / tracestate headers (request, message
// handed back, job), which the worker adopts; a caller's context without a span but with a
// remote trace context (an HTTP client's traceparent) is passed on as it is.

// startRequest starts the span of a request on subject, of kind (client or producer).
func startRequest(ctx context.Context, name, subject, id string, kind trace.SpanKind) (context.Context, trace.Span) {
	if !tracing.Recording(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracing.Start(ctx, name+" "+subject, trace.WithSpanKind(kind), trace.WithAttributes(
		attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", subject),
		attribute.String("codexpool.request_id", id)))
}

// endRequest ends a request's span with how it ended and who answered.
func endRequest(span trace.Span, r *Reply, err error) {
	if r != nil && r.Worker != "" {
		span.SetAttributes(attribute.String("codexpool.worker", r.Worker))
	}
	switch e, ok := schemas.AsError(err); {
	case err == nil || errors.Is(err, io.EOF):
	case ok:
		span.SetAttributes(attribute.String("codexpool.code", string(e.Code)))
		span.SetStatus(codes.Error, e.Message)
	default:
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
