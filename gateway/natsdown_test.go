package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/testutil"
)

// While NATS is down the gateway answers 503 unavailable with retry-after once it has waited
// Config.UnavailableWait for a reconnect, instead of holding the request for its timeout: for
// a request that arrives while NATS is down, and for a stream in flight when it goes down (as an
// SSE error event, the stream having begun).
func TestNATSDown(t *testing.T) {
	const wait = 300 * time.Millisecond
	p := newPool(t, poolOptions{gw: gateway.Config{UnavailableWait: wait}})

	// A stream in flight: its first event is out, the rest would take 20 s.
	resp := post(t, p, "/v1/responses", `{"input":"hi","stream":true,"metadata":{"sim_latency_ms":"20000"}}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: got %d, want 200", resp.StatusCode)
	}
	waitInflight(t, p, 1)
	p.ns.Shutdown()
	p.ns.WaitForShutdown()
	testutil.WaitFor(t, waitTimeout, "the gateway to see NATS down", func() bool { return !p.nc.IsConnected() })
	down := time.Now()
	frames := readFrames(t, resp.Body)
	last := frames[len(frames)-1]
	if last.event != "error" || !strings.Contains(last.data, `"code":"unavailable"`) {
		t.Errorf("stream: last frame %+v, want an unavailable error event", last)
	}
	if d := time.Since(down); d > 10*wait {
		t.Errorf("stream: ended %s after NATS went down, want about %s", d, wait)
	}

	// A request that arrives while NATS is down.
	for _, body := range []string{`{"input":"hi"}`, `{"input":"hi","stream":true}`} {
		start := time.Now()
		resp := post(t, p, "/v1/responses", body, nil)
		b := readAll(t, resp.Body)
		d := time.Since(start)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: got %d %s (retry-after %q), want 503 with retry-after", body, resp.StatusCode, b, resp.Header.Get("Retry-After"))
		}
		if _, _, code, _ := openAIError(t, b); code != "unavailable" {
			t.Errorf("%s: got code %q, want unavailable", body, code)
		}
		if d < wait || d > 10*wait {
			t.Errorf("%s: answered after %s, want after the %s wait, soon", body, d, wait)
		}
	}
}
