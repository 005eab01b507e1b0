package worker

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/schemas"
)

// A generation's spans on the worker, under the queue's "process" span: "admit" (the session,
// its binding, picking an account and waiting for one) and an "account" span per account tried,
// which holds the client's gate wait, upgrade or reuse, turn and first event (worker/codex).

// endTry ends an account's span with what its try saw: the events, a refusal that moved the
// request on, the error code.
func endTry(span trace.Span, t attempt, err error) {
	span.SetAttributes(attribute.Int("codexpool.events", t.events))
	if t.refusal != "" {
		span.SetAttributes(attribute.String("codexpool.refusal", t.refusal))
	}
	if e, ok := schemas.AsError(err); ok {
		span.SetAttributes(attribute.String("codexpool.code", string(e.Code)))
		span.SetStatus(codes.Error, e.Message)
	} else if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
