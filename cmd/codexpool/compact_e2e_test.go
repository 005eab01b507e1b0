package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2ECompactEndpoint: POST /v1/responses/compact on a gateway process, with a worker
// process and the strict simulator behind it over NATS, answers the compacted window (the user
// message and the origin's compaction item); a body without input is a 400 naming "input" that
// never reaches the origin; no output of the run carries the origin's token.
func TestE2ECompactEndpoint(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 8, Strict: true})
	w := c.startWorker("w1")
	gw, base := c.startGateway()
	post := func(body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxT(t, time.Minute), http.MethodPost, base+"/v1/responses/compact", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+gatewayKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	status, body := post(`{"model":"gpt-5.1-codex","instructions":"Be brief.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Compact this conversation"}]}]}`)
	var got struct {
		Output []struct {
			Type             string `json:"type"`
			Role             string `json:"role"`
			EncryptedContent string `json:"encrypted_content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil || len(got.Output) != 2 {
		t.Fatalf("status %d: %s; want 200 with the user message and the compaction", status, body)
	}
	if o := got.Output[0]; o.Type != "message" || o.Role != "user" {
		t.Errorf("output[0] %+v, want the user message", o)
	}
	if summary, issued := codextest.CompactionSummary(got.Output[1].EncryptedContent); got.Output[1].Type != "compaction" || summary != "compacted 2 input items (3 words)" || !issued {
		t.Errorf("output[1] %+v (summary %q), want the simulator's compaction of the message and the trigger", got.Output[1], summary)
	}

	before := c.sim.Stats().Responses
	if status, body := post(`{"model":"gpt-5.1-codex"}`); status != http.StatusBadRequest || !strings.Contains(string(body), `"param":"input"`) {
		t.Errorf("no input: status %d: %s; want 400 naming input", status, body)
	}
	if n := c.sim.Stats().Responses - before; n != 0 {
		t.Errorf("the refused body reached the origin (%d responses)", n)
	}
	for name, out := range map[string]string{"reply": string(body), "gateway": gw.out.String(), "worker": w.out.String()} {
		if strings.Contains(out, simToken) {
			t.Errorf("the origin's token is in the %s output", name)
		}
	}
}
