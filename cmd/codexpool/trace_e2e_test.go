package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/tracing/export"
	"github.com/codexpool/codexpool/internal/tracing/receiver"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/worker/codextest"
)

// Traces end to end: real gateway and worker processes export to an OTLP/HTTP receiver in the
// test process (internal/tracing/receiver, built on the OTLP protobuf definitions), which the
// tests read the traces back from.

// traceEnv exports to rcv, flushing a batch every 50 ms so the tests wait for little.
func traceEnv(rcv *receiver.Receiver) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL(), "OTEL_BSP_SCHEDULE_DELAY=50"}
}

func startReceiver(t *testing.T) *receiver.Receiver {
	t.Helper()
	rcv, err := receiver.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rcv.Close() })
	return rcv
}

// spanNamed returns the spans of spans named name.
func spanNamed(spans []receiver.Span, name string) []receiver.Span {
	var out []receiver.Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestE2ETraceAnthropicRequestAcrossProcesses: one Anthropic request, sent with a client's
// traceparent, through a gateway process and a worker process to the simulator is one trace in
// the receiver — the client's — with spans of both processes whose parents are all in the trace
// and right; both processes' log lines of the request name it.
func TestE2ETraceAnthropicRequestAcrossProcesses(t *testing.T) {
	t.Parallel()
	rcv := startReceiver(t)
	c := newCluster(t, codextest.Options{Words: 6})
	w := c.startWorker("w-trace", traceEnv(rcv)...)
	gw, base := c.startGateway(traceEnv(rcv)...)
	sendTracedMessage(t, base)

	// The trace is complete when the gateway's root span (ended after the reply) arrived.
	spans, err := rcv.Wait(ctxT(t, 20*time.Second), func(spans []receiver.Span) bool {
		for _, s := range spans {
			if s.TraceID == tracedID && s.Name == "POST /v1/messages" {
				return len(spanNamed(spans, "process codex.generate")) > 0
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := rcv.Trace(tracedID)
	if len(tr) != len(spans) {
		t.Errorf("%d spans received, %d of them in the client's trace: every span must be in it", len(spans), len(tr))
	}
	checkMessageTrace(t, tr, "w-trace")
	for _, p := range []*proc{gw, w} {
		if n := logLinesOfTrace(p.out.String(), tracedID); n == 0 {
			t.Errorf("%s: no log line carries trace_id %s", p.id, tracedID)
		}
	}
}

// The client's trace and span of sendTracedMessage's request.
const tracedID, tracedParent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"

// sendTracedMessage sends one Anthropic Messages request to the gateway at base, as a client's
// span (tracedID, tracedParent) would, and checks it is answered.
func sendTracedMessage(t *testing.T, base string) {
	t.Helper()
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"trace this request"}]}`
	req, _ := http.NewRequestWithContext(ctxT(t, 30*time.Second), http.MethodPost, base+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", gatewayKey)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Traceparent", "00-"+tracedID+"-"+tracedParent+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/messages: %d %s", resp.StatusCode, b)
	}
}

// checkMessageTrace checks the spans of sendTracedMessage's trace: one of each span a first
// request makes, under the right parent, from the gateway and the worker (whose instance is
// worker), with no prompt or secret in any attribute.
func checkMessageTrace(t *testing.T, tr []receiver.Span, worker string) {
	t.Helper()
	byID := map[string]receiver.Span{}
	services := map[string]bool{}
	for _, s := range tr {
		byID[s.SpanID] = s
		services[s.Service] = true
	}
	wantParent := map[string]string{
		"POST /v1/messages":      "", // the client's span: not in the receiver
		"request codex.generate": "POST /v1/messages",
		"process codex.generate": "request codex.generate",
		"admit":                  "process codex.generate",
		"account":                "process codex.generate",
		"gate wait":              "account",
		"upgrade":                "account",
		"turn":                   "account",
		"first event":            "turn",
	}
	for name, pname := range wantParent {
		got := spanNamed(tr, name)
		if len(got) != 1 {
			t.Errorf("%d %q spans in the trace, want 1", len(got), name)
			continue
		}
		s := got[0]
		switch p, ok := byID[s.ParentID]; {
		case pname == "" && s.ParentID != tracedParent:
			t.Errorf("%s: parent %s, want the client's span %s", name, s.ParentID, tracedParent)
		case pname != "" && (!ok || p.Name != pname):
			t.Errorf("%s: parent %q, want %q", name, p.Name, pname)
		}
	}
	if len(tr) < 6 || !services["codexpool-gateway"] || !services["codexpool-worker"] || len(services) != 2 {
		t.Errorf("%d spans from services %v, want at least 6 from codexpool-gateway and codexpool-worker", len(tr), services)
	}
	if roots := spanNamed(tr, "POST /v1/messages"); len(roots) == 1 {
		root := roots[0]
		if !strings.HasPrefix(root.Attrs["codexpool.key"], "sha256:") || root.Attrs["http.route"] != "/v1/messages" {
			t.Errorf("gateway span attributes %v: want the key's name (its digest's prefix) and the route", root.Attrs)
		}
		if ps := spanNamed(tr, "process codex.generate"); root.Instance == "" || len(ps) != 1 || ps[0].Instance != worker {
			t.Errorf("service.instance.id: gateway %q, worker spans %v, want %q", root.Instance, ps, worker)
		}
	}
	for _, s := range tr {
		for k, v := range s.Attrs {
			if strings.Contains(v, "trace this request") || strings.Contains(v, gatewayKey) || strings.Contains(v, simToken) {
				t.Errorf("span %s attribute %s = %q holds the prompt or a secret", s.Name, k, v)
			}
		}
	}
}

// logLinesOfTrace counts the JSON log lines with trace_id id.
func logLinesOfTrace(out, id string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		var m struct {
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.TraceID == id && len(m.SpanID) == 16 {
			n++
		}
	}
	return n
}

// TestE2ETraceJobRunsAfterKilledWorker: a durable job submitted under a span, whose first worker
// is killed (SIGKILL) mid-run, shows both deliveries in the submit's trace — a claim by each
// worker, deliveries 1 and 2 — and the second run's finished process span under the submit.
func TestE2ETraceJobRunsAfterKilledWorker(t *testing.T) {
	t.Parallel()
	rcv := startReceiver(t)
	c, _, _ := newJobsCluster(t, codextest.Options{Latency: 3 * time.Second})
	env := append(traceEnv(rcv), jobsEnv...)
	workers := map[string]*proc{"jw1": c.startWorker("jw1", env...), "jw2": c.startWorker("jw2", env...)}

	// The submit's span comes from a tracer of the test's own, exported to the same receiver.
	tp := testTracer(t, rcv)
	ctx, span := tp.Tracer("test").Start(ctxT(t, 30*time.Second), "batch")
	job, err := c.client.Submit(ctx, request("a job to trace", nil), client.SubmitOptions{ID: "traced-job"})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	traceID := span.SpanContext().TraceID().String()

	claims := func(spans []receiver.Span) []receiver.Span {
		var out []receiver.Span
		for _, s := range spanNamed(spans, "claim job") {
			if s.TraceID == traceID {
				out = append(out, s)
			}
		}
		return out
	}
	spans, err := rcv.Wait(ctxT(t, 20*time.Second), func(s []receiver.Span) bool { return len(claims(s)) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	first := claims(spans)[0]
	victim := workers[first.Attrs["codexpool.worker"]]
	if victim == nil {
		t.Fatalf("claim by %q, want jw1 or jw2", first.Attrs["codexpool.worker"])
	}
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	victim.waitExit(t, 10*time.Second)

	if _, err := c.client.Wait(ctxT(t, 60*time.Second), job.ID); err != nil {
		t.Fatalf("job after the kill: %v", err)
	}
	spans, err = rcv.Wait(ctxT(t, 20*time.Second), func(s []receiver.Span) bool {
		for _, p := range spanNamed(s, "process job") {
			if p.TraceID == traceID {
				return len(claims(s)) >= 2
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := rcv.Trace(traceID)
	submit := spanNamed(tr, "submit codex.jobs.submit")
	if len(submit) != 1 || spanNamed(tr, "batch")[0].SpanID != submit[0].ParentID {
		t.Fatalf("submit spans %+v, want one under the test's span", submit)
	}
	var deliveries []string
	for _, cl := range claims(spans) {
		deliveries = append(deliveries, cl.Attrs["messaging.message.delivery_count"]+"@"+cl.Attrs["codexpool.worker"])
		if cl.ParentID != submit[0].SpanID {
			t.Errorf("claim %v: parent %s, want the submit's %s", cl.Attrs, cl.ParentID, submit[0].SpanID)
		}
	}
	slices.Sort(deliveries)
	other := "jw1"
	if victim.id == "jw1" {
		other = "jw2"
	}
	if want := []string{"1@" + victim.id, "2@" + other}; !slices.Equal(deliveries, want) {
		t.Errorf("claims (delivery@worker) %v, want %v", deliveries, want)
	}
	runs := spanNamed(tr, "process job")
	if len(runs) != 1 || runs[0].ParentID != submit[0].SpanID || runs[0].Attrs["messaging.message.delivery_count"] != "2" ||
		runs[0].Instance != other || runs[0].Attrs["codexpool.code"] != "ok" {
		t.Errorf("process job spans %+v, want the second delivery's, finished ok on %s under the submit", runs, other)
	}
	t.Logf("trace %s: %d spans, claims %v", traceID, len(tr), deliveries)
}

// testTracer is a tracer provider of the test process exporting to rcv (the job's submitter).
func testTracer(t *testing.T, rcv *receiver.Receiver) *export.Provider {
	t.Helper()
	tp, err := export.New(context.Background(), export.Config{Endpoint: rcv.URL(), ServiceName: "e2e-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}
