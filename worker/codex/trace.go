package codex

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"
	"github.com/codexpool/codexpool/schemas"
)

// The client's spans, children of the generation's (see package tracing): "upgrade" for each
// WebSocket upgrade attempt (the gate's "gate wait" comes before each), "reuse" when a pooled or
// pinned socket is taken, "turn" from the request frame to the terminal event with "first
// event" inside it, and "http stream" for a generation over the HTTP fallback. Their attributes
// are the socket id, its status and the error code: never a header, a token or an event.

// startSpan starts one of the client's spans under ctx's.
func startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracing.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan ends a span with err: its contract code and message, which are redacted already.
func endSpan(span trace.Span, err error) {
	if err != nil {
		if e, ok := schemas.AsError(err); ok {
			span.SetAttributes(attribute.String("codexpool.code", string(e.Code)))
			span.SetStatus(codes.Error, e.Message)
		} else if !errors.Is(err, context.Canceled) {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// reuseSpan records that the generation took socket id from the pool or its pin.
func reuseSpan(ctx context.Context, id string) {
	if !tracing.Recording(ctx) {
		return
	}
	_, span := startSpan(ctx, "reuse", attribute.String("codexpool.socket", id))
	span.End()
}

// firstEvent wraps onEvent so that the first event ends span ("first event").
func firstEvent(span trace.Span, onEvent func(Event) error) func(Event) error {
	return func(ev Event) error {
		if span.IsRecording() {
			span.SetAttributes(attribute.String("codexpool.event", ev.Type))
			span.End()
		}
		if onEvent == nil {
			return nil
		}
		return onEvent(ev)
	}
}
