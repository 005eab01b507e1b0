package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/internal/tracing"
)

// recorder is a tracer provider whose spans a test reads back once they ended.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	return tp, rec
}

// byName indexes ended spans by name (the last of each name wins).
func byName(spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	m := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		m[s.Name()] = s
	}
	return m
}

// TestTraceAcrossGatewayAndWorker sends an Anthropic request with a client's traceparent
// through the gateway, NATS and a worker to the simulator, the gateway and the worker each with
// a tracer provider of its own (as two processes), and checks the one trace: the client's trace
// id adopted, every span's parent, the attributes that name the request and none that hold its
// prompt or a key, and trace_id / span_id on the gateway's log line.
func TestTraceAcrossGatewayAndWorker(t *testing.T) {
	gwTP, gwRec := recorder(t)
	wTP, wRec := recorder(t)
	logs := &testutil.SyncBuffer{}
	p := newPool(t, poolOptions{workerTracer: wTP, gw: gateway.Config{TracerProvider: gwTP,
		Logger: slog.New(tracing.LogHandler(slog.NewJSONHandler(logs, nil)))}})

	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	const prompt = "a prompt nobody may read in a span"
	body := `{"model":"gpt-5.1-codex","max_tokens":64,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	for turn := range 2 {
		resp := post(t, p, "/v1/messages", body, map[string]string{
			"traceparent": "00-" + clientTrace + "-" + clientSpan + "-01", "tracestate": "vendor=x"})
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, b)
		}
	}

	// The gateway's spans end before its reply is complete; the worker's before its last message.
	gw := byName(gwRec.Ended())
	w := byName(wRec.Ended())
	want := func(m map[string]sdktrace.ReadOnlySpan, name, parent string) sdktrace.ReadOnlySpan {
		t.Helper()
		s, ok := m[name]
		if !ok {
			t.Fatalf("no %q span; have %v", name, keys(m))
		}
		if got := s.SpanContext().TraceID().String(); got != clientTrace {
			t.Errorf("%s: trace %s, want the client's %s", name, got, clientTrace)
		}
		if got := s.Parent().SpanID().String(); got != parent {
			t.Errorf("%s: parent %s, want %s", name, got, parent)
		}
		return s
	}
	id := func(s sdktrace.ReadOnlySpan) string { return s.SpanContext().SpanID().String() }

	root := want(gw, "POST /v1/messages", clientSpan)
	if root.SpanKind() != trace.SpanKindServer || !root.Parent().IsRemote() {
		t.Errorf("gateway span: kind %v, remote parent %v", root.SpanKind(), root.Parent().IsRemote())
	}
	req := want(gw, "request codex.generate", id(root))
	proc := want(w, "process codex.generate", id(req))
	admit := want(w, "admit", id(proc))
	acct := want(w, "account", id(proc))
	// The first turn waited at the gate and opened the socket; the second took it from the pool.
	nameOf := map[string]string{}
	for _, s := range wRec.Ended() {
		nameOf[id(s)] = s.Name()
	}
	for name, parent := range map[string]string{"gate wait": "account", "upgrade": "account", "reuse": "account",
		"turn": "account", "first event": "turn"} {
		s := want(w, name, w[name].Parent().SpanID().String())
		if got := nameOf[s.Parent().SpanID().String()]; got != parent {
			t.Errorf("%s: parent is a %q span, want %q", name, got, parent)
		}
	}
	if got := w["reuse"].Parent().SpanID(); got != acct.SpanContext().SpanID() {
		t.Errorf("reuse is not in the second turn's account span")
	}
	if admit.EndTime().After(acct.StartTime()) {
		t.Errorf("admit ends %v, after the account's try starts %v", admit.EndTime(), acct.StartTime())
	}

	attrs := map[string]string{}
	for _, s := range append(gwRec.Ended(), wRec.Ended()...) {
		for _, kv := range s.Attributes() {
			v := kv.Value.String()
			if strings.Contains(v, "nobody may read") || strings.Contains(v, key) || strings.Contains(v, simToken) {
				t.Errorf("span %s attribute %s holds the prompt or a secret: %q", s.Name(), kv.Key, v)
			}
			attrs[s.Name()+" "+string(kv.Key)] = v
		}
	}
	for k, v := range map[string]string{
		"POST /v1/messages http.route":                "/v1/messages",
		"POST /v1/messages http.response.status_code": "200",
		"POST /v1/messages gen_ai.request.model":      "gpt-5.1-codex",
		"process codex.generate codexpool.worker":     "w1",
		"process codex.generate codexpool.code":       "ok",
	} {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}

	var line struct{ Msg, TraceID, SpanID string }
	for _, l := range bytes.Split(bytes.TrimSpace([]byte(logs.String())), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil && m["msg"] == "request" {
			line.TraceID, _ = m["trace_id"].(string)
			line.SpanID, _ = m["span_id"].(string)
		}
	}
	if line.TraceID != clientTrace || line.SpanID != id(root) {
		t.Errorf("request log line: trace_id %q span_id %q, want %s %s\n%s", line.TraceID, line.SpanID, clientTrace, id(root), logs.String())
	}
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
