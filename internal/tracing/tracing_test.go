package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"
)

// TestStartFollowsTheRoot: a child is recorded exactly when its local root is, under each
// sampler the SDK offers, and a child of a root nobody records is no span of its own (the same
// context, the root's span id) but keeps the trace id that log lines and NATS headers carry.
func TestStartFollowsTheRoot(t *testing.T) {
	samplers := map[string]sdktrace.Sampler{
		"always_on":                sdktrace.AlwaysSample(),
		"always_off":               sdktrace.NeverSample(),
		"traceidratio":             sdktrace.TraceIDRatioBased(0.5),
		"parentbased_always_on":    sdktrace.ParentBased(sdktrace.AlwaysSample()),
		"parentbased_traceidratio": sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.5)),
	}
	for name, sampler := range samplers {
		t.Run(name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			kept, dropped := 0, 0
			for range 200 {
				root, rootSpan := tp.Tracer("test").Start(context.Background(), "root")
				child, childSpan := tracing.Start(root, "child")
				_, grandchild := tracing.Start(child, "grandchild")
				if got, want := childSpan.SpanContext().TraceID(), rootSpan.SpanContext().TraceID(); got != want {
					t.Fatalf("child's trace id %s, root's %s", got, want)
				}
				if rootSpan.IsRecording() {
					kept++
					if !childSpan.IsRecording() || !grandchild.IsRecording() {
						t.Fatal("a recorded root's children are not recorded")
					}
					if childSpan.SpanContext().SpanID() == rootSpan.SpanContext().SpanID() {
						t.Fatal("a recorded child has its root's span id")
					}
				} else {
					dropped++
					if !childSpan.SpanContext().Equal(rootSpan.SpanContext()) || child != root {
						t.Fatal("a child of a dropped root is a span of its own")
					}
					if grandchild.IsRecording() {
						t.Fatal("a grandchild of a dropped root is recorded")
					}
				}
				grandchild.End()
				childSpan.End()
				rootSpan.End()
			}
			if got := len(rec.Ended()); got != 3*kept {
				t.Fatalf("%d spans ended for %d recorded roots, want %d", got, kept, 3*kept)
			}
			// What a sampler with a ratio must do: drop some and keep some.
			if name == "traceidratio" || name == "parentbased_traceidratio" {
				if kept == 0 || dropped == 0 {
					t.Fatalf("ratio 0.5 kept %d and dropped %d roots of 200", kept, dropped)
				}
			}
		})
	}
}

// TestStartWithoutSpan: with no span in ctx (tracing off) Start makes none, and under a remote
// trace context only (an HTTP client's traceparent, tracing off here) it keeps that trace.
func TestStartWithoutSpan(t *testing.T) {
	ctx, span := tracing.Start(context.Background(), "x")
	if span.SpanContext().IsValid() || span.IsRecording() || ctx != context.Background() {
		t.Fatal("a span was made with no parent")
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, Remote: true})
	remote := trace.ContextWithRemoteSpanContext(context.Background(), sc)
	_, span = tracing.Start(remote, "x")
	if span.SpanContext().TraceID() != sc.TraceID() || span.IsRecording() {
		t.Fatalf("under a remote parent: trace %s recording %v", span.SpanContext().TraceID(), span.IsRecording())
	}
	if tracing.Recording(remote) {
		t.Fatal("a remote parent counted as recorded")
	}
}
