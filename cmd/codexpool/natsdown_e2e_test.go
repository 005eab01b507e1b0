package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2EGatewayAnswers503WhenNATSGoesAway is issue 27's first trap, with the default setup and
// the default settings: one worker that embeds NATS, a gateway that joins it with the local
// credential. Once the worker (and with it NATS) is stopped, a request gets 503 unavailable with
// retry-after within 5 s — it used to hang for the 10-minute request timeout and then 504.
func TestE2EGatewayAnswers503WhenNATSGoesAway(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sim := codextest.NewServer(codextest.Options{Token: simToken, Words: 3})
	t.Cleanup(sim.Close)
	addr := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	home, state := t.TempDir(), t.TempDir()
	c := &cluster{t: t, sim: sim}
	local := []string{"HOME=" + home, "XDG_STATE_HOME=" + state, "CODEXPOOL_NATS_URL=nats://" + addr}
	w := c.startProcess("w1", []string{"worker"}, "HOME="+home, "XDG_STATE_HOME="+state,
		"CODEXPOOL_NATS_URL=", "CODEXPOOL_EMBEDDED_NATS_ADDR="+addr, "CODEXPOOL_CODEX_URL="+sim.URL,
		"CODEXPOOL_CODEX_TOKEN="+simToken, "CODEXPOOL_WORKER_ID=w1")
	testutil.WaitFor(t, 60*time.Second, "w1 serving", func() bool { return strings.Contains(w.out.String(), `"msg":"serving"`) })
	_, base := c.startGateway(local...)

	post := func() (*http.Response, time.Duration) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/responses", strings.NewReader(`{"input":"Say hello"}`))
		req.Header.Set("Authorization", "Bearer "+gatewayKey)
		req.Header.Set("Content-Type", "application/json")
		began := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp, time.Since(began)
	}
	if resp, _ := post(); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the worker up: %d, want 200", resp.StatusCode)
	}
	w.stop(t, 60*time.Second)
	resp, took := post()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("with NATS gone: %d, retry-after %q; want 503 with retry-after", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	t.Logf("503 after %s", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the 503 took %s, want it within 5 s of NATS going away", took)
	}
}
