package queue

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"
	"github.com/codexpool/codexpool/schemas"
)

// The worker's spans (see package tracing): a request's or a job's "process" span is the root of
// this process's part of a trace, a child of the trace context its message carried (the
// traceparent header). A job's deliveries are each a "process" span under the submit's, so a
// redelivery after a killed worker shows as a second run in the same trace; each delivery also
// leaves a "claim" span, ended at once, which is exported even when the run's own span never ends.

// Span attribute keys of the worker's spans.
const (
	attrRequestID = attribute.Key("codexpool.request_id")
	attrWorker    = attribute.Key("codexpool.worker")
	attrModel     = attribute.Key("gen_ai.request.model")
	attrStream    = attribute.Key("codexpool.stream")
	attrCode      = attribute.Key("codexpool.code")
	attrJob       = attribute.Key("codexpool.job")
	attrDelivery  = attribute.Key("messaging.message.delivery_count")
	attrHops      = attribute.Key("codexpool.hops")
	attrDest      = attribute.Key("messaging.destination.name")
	attrSystem    = attribute.Key("messaging.system")
)

// remoteParent is the trace context a message's headers carry; invalid for none.
func remoteParent(hdr nats.Header) trace.SpanContext {
	return trace.SpanContextFromContext(parentOf(context.Background(), hdr))
}

// parentOf is the trace context a message's headers carry; ctx gets it as its remote parent.
func parentOf(ctx context.Context, hdr nats.Header) context.Context {
	return tracing.ExtractNATS(ctx, hdr)
}

// startProcess starts the span of one generation run on this worker, from received (when the
// message arrived) under the trace context of parent.
func (s *Service) startProcess(ctx context.Context, parent trace.SpanContext, name string, r *schemas.Request,
	received time.Time, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	attrs = append(attrs, attrSystem.String("nats"), attrRequestID.String(r.ID), attrWorker.String(s.cfg.WorkerID),
		attrModel.String(r.Model), attrStream.Bool(r.Stream))
	return s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(received),
		trace.WithAttributes(attrs...))
}

// endSpan ends a generation's span with its outcome: the error code, or ok.
func endSpan(span trace.Span, e *schemas.Error) {
	if e != nil {
		span.SetAttributes(attrCode.String(string(e.Code)))
		span.SetStatus(codes.Error, e.Message)
	} else {
		span.SetAttributes(attrCode.String("ok"))
	}
	span.End()
}

// attrs are the span attributes of a job's delivery.
func (j *job) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{attrJob.String(j.t.job), attrDelivery.Int64(int64(j.meta.NumDelivered))}
}

// claimSpan records that this worker took a delivery of a job: a span ended at once, so it is
// exported even if the worker dies during the run (the run's span then never ends).
func (s *Service) claimSpan(j *job) {
	if !j.parent.IsValid() {
		return
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), j.parent)
	_, span := s.tracer.Start(ctx, "claim job", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(j.received),
		trace.WithAttributes(append(j.attrs(), attrRequestID.String(j.t.id), attrWorker.String(s.cfg.WorkerID))...))
	span.End()
}

// handBackSpan records a hand-back to the group as a span under the request's trace and makes
// it the parent the next worker adopts (fwd's traceparent).
func (s *Service) handBackSpan(fwd *nats.Msg, id string, hops int) {
	ctx := parentOf(context.Background(), fwd.Header)
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return // an untraced request stays untraced
	}
	ctx, span := s.tracer.Start(ctx, "hand back", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrRequestID.String(id), attrWorker.String(s.cfg.WorkerID), attrHops.Int(hops), attrDest.String(s.cfg.Subject)))
	tracing.InjectNATS(ctx, fwd.Header)
	span.End()
}
