package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/internal/usage"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// meteredPool is a real pool with JetStream: the simulator with two accounts, one worker using
// both, and two gateways, each with its own usage store, sharing the keys below.
type meteredPool struct {
	nats   string // the NATS server's URL
	sim    *codextest.Server
	urls   [2]string
	quotas [2]*gateway.QuotaPoller
}

var meterKeys = []gateway.Key{
	{Name: "limited", SHA256: sha256.Sum256([]byte("sk-limited")), Limits: gateway.Limits{RequestsPerMinute: 3}},
	{Name: "free", SHA256: sha256.Sum256([]byte("sk-free"))},
	{Name: "admin", SHA256: sha256.Sum256([]byte("sk-admin")), Admin: true},
	{Name: "narrow", SHA256: sha256.Sum256([]byte("sk-narrow")), Models: []string{"gpt-5.1-codex"}},
	{Name: "metered", SHA256: sha256.Sum256([]byte("sk-metered")), Limits: gateway.Limits{RequestsPerMinute: 1 << 30, MaxConcurrent: 1 << 20}},
}

// With windows, the accounts have 5 h and weekly windows with small budgets (for the quota).
func newMeteredPool(t testing.TB, windows bool) *meteredPool {
	t.Helper()
	ns, err := embedded.Start("127.0.0.1:0", nil, embedded.WithJetStream(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	ctx := ctxT(t, waitTimeout)
	// Windows of 5 h and a week: each completed response uses 10% (a) or 5% (b) of both.
	wins := func(budget int) []codextest.Window {
		if !windows {
			return nil
		}
		return []codextest.Window{{Length: 5 * time.Hour, Budget: budget}, {Length: 7 * 24 * time.Hour, Budget: budget}}
	}
	p := &meteredPool{sim: codextest.NewServer(codextest.Options{Words: words, Accounts: []codextest.Account{
		{Name: "acct-a", Token: "tok-a", Windows: wins(10)}, {Name: "acct-b", Token: "tok-b", Windows: wins(20)}}})}
	t.Cleanup(p.sim.Close)
	w, err := worker.New(worker.Config{ID: "w1", URL: p.sim.URL,
		Accounts: []worker.Account{{Name: "acct-a", Token: "tok-a"}, {Name: "acct-b", Token: "tok-b"}}}, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	wnc, err := queue.Connect(ctx, ns.ClientURL(), "worker", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)
	svc, err := queue.NewService(wnc, queue.Config{WorkerID: "w1", WorkerStats: w.StatsData}, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = svc.Shutdown(sctx)
	})
	p.nats = ns.ClientURL()
	for i := range p.urls {
		p.urls[i], p.quotas[i] = startMeteredGateway(t, ctx, ns.ClientURL(), nil)
	}
	return p
}

// startMeteredGateway starts a gateway with its own usage store on the NATS server at url, with
// jobs as its job store (nil: none).
func startMeteredGateway(t testing.TB, ctx context.Context, url string, jobs gateway.Jobs) (string, *gateway.QuotaPoller) {
	t.Helper()
	nc, err := queue.Connect(ctx, url, "gateway", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := usage.Open(ctx, js, usage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = st.Close(cctx)
	})
	quota := gateway.NewQuotaPoller(nc, time.Hour) // polled by the tests themselves
	gw := gateway.New(client.New(nc, client.Options{}), nc, gateway.Config{ClientKeys: meterKeys, Meter: st, Quota: quota, Jobs: jobs})
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv.URL, quota
}

// send posts body to base+path with the secret as a Bearer key.
func send(t *testing.T, base, secret, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp := do(t, req)
	return resp, readAll(t, resp.Body)
}

const (
	respBody   = `{"model":"gpt-5.1-codex","input":"hi"}`
	chatBody   = `{"model":"gpt-5.1-codex","messages":[{"role":"user","content":"hi"}]}`
	msgBody    = `{"model":"gpt-5.1-codex","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	streamBody = `{"model":"gpt-5.1-codex","input":"hi","stream":true}`
)

// TestKeyLimitAcrossGatewaysInEachShape: a key limited to 3 requests a minute gets 3, over two
// gateways, then 429 with retry-after in each API's own error shape; other keys are unaffected.
func TestKeyLimitAcrossGatewaysInEachShape(t *testing.T) {
	p := newMeteredPool(t, false)
	for i := range 3 {
		if resp, b := send(t, p.urls[i%2], "sk-limited", "POST", "/v1/responses", respBody); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	for _, tc := range []struct {
		name, path, body, errType string
		anthropic                 bool
	}{
		{"responses", "/v1/responses", respBody, "rate_limit_error", false},
		{"responses stream", "/v1/responses", streamBody, "rate_limit_error", false},
		{"chat", "/v1/chat/completions", chatBody, "rate_limit_error", false},
		{"messages", "/v1/messages", msgBody, "rate_limit_error", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, base := range p.urls {
				resp, b := send(t, base, "sk-limited", "POST", tc.path, tc.body)
				if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
					t.Fatalf("got %d retry-after %q %s, want 429 with retry-after", resp.StatusCode, resp.Header.Get("Retry-After"), b)
				}
				var e struct {
					Type  string `json:"type"`
					Error struct {
						Type string `json:"type"`
						Code string `json:"code"`
					} `json:"error"`
				}
				if err := json.Unmarshal(b, &e); err != nil {
					t.Fatalf("%v: %s", err, b)
				}
				if e.Error.Type != tc.errType || (tc.anthropic && e.Type != "error") || (!tc.anthropic && e.Error.Code != "rate_limit_exceeded") {
					t.Errorf("got %s, want the %s shape with type %s", b, map[bool]string{true: "Anthropic", false: "OpenAI"}[tc.anthropic], tc.errType)
				}
			}
		})
	}
	for i := range 5 {
		if resp, b := send(t, p.urls[i%2], "sk-free", "POST", "/v1/responses", respBody); resp.StatusCode != 200 {
			t.Fatalf("unlimited key, request %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
}

// TestKeyModels: a key with a model list gets 403 for any other model.
func TestKeyModels(t *testing.T) {
	p := newMeteredPool(t, false)
	if resp, b := send(t, p.urls[0], "sk-narrow", "POST", "/v1/responses", respBody); resp.StatusCode != 200 {
		t.Fatalf("allowed model: %d %s", resp.StatusCode, b)
	}
	resp, b := send(t, p.urls[0], "sk-narrow", "POST", "/v1/responses", `{"model":"gpt-5.2","input":"hi"}`)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `"model_not_allowed"`) {
		t.Fatalf("other model: got %d %s, want 403 model_not_allowed", resp.StatusCode, b)
	}
}

// TestUsageReport: what went through both gateways, one-shot and streamed, adds up per key and
// per account in GET /v1/usage to what the origin counted; only an admin key may read it.
func TestUsageReport(t *testing.T) {
	p := newMeteredPool(t, false)
	for i, c := range []struct{ secret, path, body string }{
		{"sk-free", "/v1/responses", respBody},
		{"sk-free", "/v1/responses", streamBody},
		{"sk-free", "/v1/chat/completions", chatBody},
		{"sk-limited", "/v1/messages", msgBody},
		{"sk-limited", "/v1/responses", respBody},
	} {
		if resp, b := send(t, p.urls[i%2], c.secret, "POST", c.path, c.body); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	if resp, b := send(t, p.urls[0], "sk-free", "GET", "/v1/usage", ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a key without admin: got %d %s, want 403", resp.StatusCode, b)
	}
	origin := p.sim.Stats()
	read := func(by string) usage.Report {
		var rep usage.Report
		testutil.WaitFor(t, 10*time.Second, "5 records", func() bool {
			resp, b := send(t, p.urls[1], "sk-admin", "GET", "/v1/usage?by="+by+"&since=1h", "")
			if resp.StatusCode != 200 {
				t.Fatalf("GET /v1/usage: %d %s", resp.StatusCode, b)
			}
			rep = usage.Report{}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			return rep.Total.Requests == 5
		})
		return rep
	}
	byKey := read("key")
	want := map[string]int64{"free": 3, "limited": 2}
	for _, r := range byKey.Rows {
		if r.Requests != want[r.Name] {
			t.Errorf("key %s: %d requests, want %d", r.Name, r.Requests, want[r.Name])
		}
	}
	if byKey.Total.Requests != origin.Responses || byKey.Total.Input != origin.InputTokens || byKey.Total.Output == 0 {
		t.Errorf("total %+v, want %d requests and %d input tokens as the origin counted (and output tokens)",
			byKey.Total, origin.Responses, origin.InputTokens)
	}
	byAccount := read("account")
	for _, r := range byAccount.Rows {
		if r.Name == "-" {
			t.Errorf("%d requests without an account (no Codex-Account on the reply)", r.Requests)
		}
		if got, wantN := r.Requests, origin.Accounts[r.Name].Responses; got != wantN {
			t.Errorf("account %q: %d requests, the origin counted %d", r.Name, got, wantN)
		}
	}
}
