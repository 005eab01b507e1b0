//go:build jaeger

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/internal/tracing/receiver"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2ETraceInJaeger: the same Anthropic request as TestE2ETraceAnthropicRequestAcrossProcesses,
// exported by the real gateway and worker over OTLP/HTTP to a real Jaeger v2 (its all-in-one
// binary with in-memory storage) and read back through Jaeger's query API, is one trace with
// the same spans and parents. Jaeger takes minutes to build, so this test is built only with
// the tag jaeger, by scripts/jaeger/run.sh (which builds Jaeger and names it in CODEXPOOL_JAEGER),
// not in CI.
func TestE2ETraceInJaeger(t *testing.T) {
	bin := os.Getenv("CODEXPOOL_JAEGER")
	if bin == "" {
		t.Fatal("CODEXPOOL_JAEGER names no Jaeger v2 binary: run scripts/jaeger/run.sh, which builds one")
	}
	t.Parallel()
	otlp, query := startJaeger(t, bin)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp, "OTEL_BSP_SCHEDULE_DELAY=50"}
	c := newCluster(t, codextest.Options{Words: 6})
	c.startWorker("w-jaeger", env...)
	_, base := c.startGateway(env...)
	sendTracedMessage(t, base)

	var tr []receiver.Span
	testutil.WaitFor(t, 20*time.Second, "the trace in Jaeger, with the gateway's root and the worker's spans", func() bool {
		tr = jaegerTrace(t, query, tracedID)
		return len(spanNamed(tr, "POST /v1/messages")) == 1 && len(spanNamed(tr, "first event")) == 1
	})
	checkMessageTrace(t, tr, "w-jaeger")
	t.Logf("Jaeger holds trace %s: %d spans", tracedID, len(tr))
}

// startJaeger runs bin with in-memory storage, its OTLP/HTTP receiver and query API on free
// loopback ports, until the test ends; it returns the receiver's and the query API's URLs once
// the query API answers.
func startJaeger(t *testing.T, bin string) (otlp, query string) {
	t.Helper()
	ports := freePorts(t, 3)
	config := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter]}
  telemetry:
    metrics: {level: none}
    logs: {level: warn}
extensions:
  jaeger_storage:
    backends: {mem: {memory: {max_traces: 1000}}}
  jaeger_query:
    storage: {traces: mem}
    http: {endpoint: "127.0.0.1:%d"}
    grpc: {endpoint: "127.0.0.1:%d"}
receivers:
  otlp:
    protocols: {http: {endpoint: "127.0.0.1:%d"}}
processors:
  batch: {timeout: 50ms}
exporters:
  jaeger_storage_exporter: {trace_storage: mem}
`, ports[0], ports[1], ports[2])
	file := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", file)
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("jaeger's output:\n%s", out.String())
		}
	})
	query = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	testutil.WaitFor(t, 30*time.Second, "Jaeger's query API", func() bool {
		resp, err := http.Get(query + "/api/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return "http://127.0.0.1:" + strconv.Itoa(ports[2]), query
}

// freePorts returns n loopback TCP ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// jaegerTrace reads trace id from Jaeger's query API (GET /api/traces/ID), as receiver spans:
// the parent is the span's CHILD_OF reference, the service and instance its process's. None
// while Jaeger has no such trace.
func jaegerTrace(t *testing.T, query, id string) []receiver.Span {
	t.Helper()
	resp, err := http.Get(query + "/api/traces/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	type tag struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	}
	var body struct {
		Data []struct {
			Spans []struct {
				TraceID    string `json:"traceID"`
				SpanID     string `json:"spanID"`
				Operation  string `json:"operationName"`
				References []struct {
					RefType string `json:"refType"`
					SpanID  string `json:"spanID"`
				} `json:"references"`
				ProcessID string `json:"processID"`
				Tags      []tag  `json:"tags"`
			} `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
				Tags        []tag  `json:"tags"`
			} `json:"processes"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/traces/%s: %d, %v", id, resp.StatusCode, err)
	}
	var out []receiver.Span
	for _, d := range body.Data {
		for _, s := range d.Spans {
			sp := receiver.Span{TraceID: s.TraceID, SpanID: s.SpanID, Name: s.Operation, Attrs: map[string]string{}}
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					sp.ParentID = r.SpanID
				}
			}
			for _, tg := range s.Tags {
				sp.Attrs[tg.Key] = fmt.Sprint(tg.Value)
			}
			p := d.Processes[s.ProcessID]
			sp.Service = p.ServiceName
			for _, tg := range p.Tags {
				if tg.Key == "service.instance.id" {
					sp.Instance = fmt.Sprint(tg.Value)
				}
			}
			out = append(out, sp)
		}
	}
	return out
}
