package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/internal/usage"
	"github.com/codexpool/codexpool/queue"
)

// TestBackgroundRequestsCountAgainstTheKey: "background": true is no way around a key's limits:
// a key at 3 requests a minute gets 3 background responses, then 429 with retry-after, and the 4th
// never reaches the job store; a model outside the key's list is refused before it; each job's
// tokens reach the key's usage when its result is read, once however often and on whichever
// gateway it is read.
func TestBackgroundRequestsCountAgainstTheKey(t *testing.T) {
	p := newMeteredPool(t, false)
	ctx := ctxT(t, waitTimeout)
	jobs := newFakeJobs()
	// Two gateways with the same store of jobs, each with its own usage store.
	base, _ := startMeteredGateway(t, ctx, p.nats, jobs)
	otherBase, _ := startMeteredGateway(t, ctx, p.nats, jobs)
	nc, err := queue.Connect(ctx, p.nats, "usage-reader", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	const bg = `{"model":"gpt-5.1-codex","input":"hi","background":true}`
	for i := range 3 {
		if resp, b := send(t, base, "sk-limited", "POST", "/v1/responses", bg); resp.StatusCode != http.StatusOK {
			t.Fatalf("background %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	resp, b := send(t, base, "sk-limited", "POST", "/v1/responses", bg)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("4th background: %d retry-after %q %s, want 429 with retry-after", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	resp, b = send(t, base, "sk-narrow", "POST", "/v1/responses", `{"model":"gpt-5.2","input":"hi","background":true}`)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `"model_not_allowed"`) {
		t.Fatalf("background with another model: %d %s, want 403 model_not_allowed", resp.StatusCode, b)
	}
	jobs.mu.Lock()
	n := len(jobs.bodies)
	jobs.mu.Unlock()
	if n != 3 {
		t.Errorf("the job store got %d submissions, want the 3 admitted", n)
	}
	// The results arrive; each is read three times, on both gateways: its usage counts once.
	jobs.mu.Lock()
	var ids []string
	for id := range jobs.bodies {
		ids = append(ids, id)
	}
	jobs.mu.Unlock()
	for _, id := range ids {
		jobs.finish(id, []byte(`{"object":"response","status":"completed","model":"gpt-5.1-codex","output":[],`+
			`"usage":{"input_tokens":100,"output_tokens":7,"input_tokens_details":{"cached_tokens":40}}}`))
		for _, base := range []string{base, base, otherBase} {
			if resp, b := send(t, base, "sk-limited", "GET", "/v1/responses/"+id, ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d %s", id, resp.StatusCode, b)
			}
		}
	}
	var got usage.Row
	testutil.WaitFor(t, 10*time.Second, "the limited key's 3 background responses in its usage", func() bool {
		rep, err := usage.Query(ctx, js, "", time.Now().Add(-time.Hour), usage.ByKey)
		for _, r := range rep.Rows {
			if r.Name == "limited" {
				got = r
			}
		}
		return err == nil && got.Requests >= 3
	})
	if got.Requests != 3 || got.Input != 300 || got.Output != 21 || got.Cached != 120 {
		t.Errorf("usage of the limited key: %+v, want 3 requests, 300 input (120 cached) and 21 output tokens: each job once", got.Totals)
	}
}
