package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/gateway"
)

// TestRecentRequestsCarryTraceIDs: the gateway remembers its slow and failed API requests with
// their trace ids (adopted from the client's traceparent here), newest first; health probes are
// not remembered, and nothing of a request's body is.
func TestRecentRequestsCarryTraceIDs(t *testing.T) {
	tp, _ := recorder(t)
	p := newPool(t, poolOptions{gw: gateway.Config{TracerProvider: tp}})
	const failedTrace = "5b8efff798038103d269b633813fc60c"
	for range 3 {
		resp := post(t, p, "/v1/responses", `{"input":"fine"}`, nil)
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("good request: %d", resp.StatusCode)
		}
	}
	resp := post(t, p, "/v1/responses", `{"input":"the secret prompt","temperature":"hot"}`,
		map[string]string{"traceparent": "00-" + failedTrace + "-eee19b7ec3c1b174-01"})
	io.Copy(io.Discard, resp.Body)
	failedID := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad request: %d, want 400", resp.StatusCode)
	}
	get(t, p, "/healthz", false).Body.Close()

	rec := p.gw.Recent()
	if len(rec.Failed) != 1 || rec.Failed[0].RequestID != failedID || rec.Failed[0].TraceID != failedTrace ||
		rec.Failed[0].Status != 400 || rec.Failed[0].Path != "/v1/responses" {
		t.Fatalf("failed %+v, want the one 400 with trace %s", rec.Failed, failedTrace)
	}
	if len(rec.Slow) != 4 {
		t.Fatalf("slow %+v, want the 4 API requests (not the probe)", rec.Slow)
	}
	for i, r := range rec.Slow {
		if r.TraceID == "" || len(r.TraceID) != 32 {
			t.Errorf("slow[%d] %+v: no trace id", i, r)
		}
		if i > 0 && r.Time.After(rec.Slow[i-1].Time) {
			t.Errorf("slow not newest first: %v after %v", r.Time, rec.Slow[i-1].Time)
		}
		if strings.Contains(r.Error, "the secret prompt") {
			t.Errorf("slow[%d] keeps the body: %q", i, r.Error)
		}
	}
}
