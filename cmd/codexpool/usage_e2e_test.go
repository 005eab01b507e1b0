package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/testutil"
	usagestore "github.com/codexpool/codexpool/internal/usage"
	"github.com/codexpool/codexpool/worker/codextest"
)

// Usage accounting and per-key limits end to end: gateway and worker processes of the real
// binary, a JetStream server (file store) and the simulator in the test process.

const usageKeysFile = `keys:
  - {name: limited, secret: sk-e2e-limited-0001, requests_per_minute: 3}
  - {name: free, secret: sk-e2e-free-0002}
  - {name: ops, secret: sk-e2e-admin-0003, admin: true}
`

func writeKeysFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(p, []byte(usageKeysFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// call posts body to base+path with key and returns the status, the retry-after header and the
// body; err is a transport error (the gateway is not there).
func call(ctx context.Context, base, key, path, body string) (int, string, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), b, err
}

// runUsageCmd runs `codexpool usage args...` against the cluster and returns its stdout.
func (c *cluster) runUsageCmd(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(binPath, append([]string{"usage"}, args...)...)
	cmd.Env = []string{"HOME=" + c.t.TempDir(), "PATH=" + os.Getenv("PATH"), "CODEXPOOL_NATS_URL=" + c.url}
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("codexpool usage %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// usageReport runs `codexpool usage --json` with args.
func (c *cluster) usageReport(args ...string) usagestore.Report {
	c.t.Helper()
	var rep usagestore.Report
	out := c.runUsageCmd(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		c.t.Fatalf("%v: %s", err, out)
	}
	return rep
}

// TestE2EKeyLimitAcrossGateways is target 2: a key limited to 3 requests a minute gets 3 over two
// gateway processes, then 429 with retry-after from both; an unlimited key is unaffected;
// `codexpool usage --by key` shows 3 for it.
func TestE2EKeyLimitAcrossGateways(t *testing.T) {
	c := newJetStreamCluster(t, codextest.Options{Words: 3})
	c.startWorker("wu1")
	keys := writeKeysFile(t)
	_, gw1 := c.startGateway("CODEXPOOL_GATEWAY_KEYS=", "CODEXPOOL_GATEWAY_KEYS_FILE="+keys)
	_, gw2 := c.startGateway("CODEXPOOL_GATEWAY_KEYS=", "CODEXPOOL_GATEWAY_KEYS_FILE="+keys)
	ctx := ctxT(t, 60*time.Second)
	body := `{"model":"gpt-5.1-codex","input":"limit e2e"}`
	for i, base := range []string{gw1, gw2, gw1} {
		if st, _, b, err := call(ctx, base, "sk-e2e-limited-0001", "/v1/responses", body); err != nil || st != 200 {
			t.Fatalf("request %d: %d %s %v", i+1, st, b, err)
		}
	}
	for _, base := range []string{gw2, gw1} {
		st, retry, b, err := call(ctx, base, "sk-e2e-limited-0001", "/v1/responses", body)
		if err != nil || st != http.StatusTooManyRequests || !strings.Contains(string(b), `"rate_limit_exceeded"`) {
			t.Fatalf("4th request: got %d %s %v, want 429 rate_limit_exceeded", st, b, err)
		}
		if n, err := strconv.Atoi(retry); err != nil || n < 1 || n > 60 {
			t.Errorf("retry-after %q, want 1..60 seconds", retry)
		}
	}
	for i := range 6 {
		if st, _, b, err := call(ctx, []string{gw1, gw2}[i%2], "sk-e2e-free-0002", "/v1/responses", body); err != nil || st != 200 {
			t.Fatalf("unlimited key, request %d: %d %s %v", i+1, st, b, err)
		}
	}
	var out string
	testutil.WaitFor(t, 20*time.Second, "usage to show 3 requests for limited", func() bool {
		out = c.runUsageCmd("--by", "key")
		return usageLine(out, "limited", "3") && usageLine(out, "free", "6")
	})
	t.Logf("codexpool usage --by key:\n%s", out)
}

// usageLine reports whether the table has a row for name whose requests column is n.
func usageLine(table, name, n string) bool {
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == name && f[1] == n {
			return true
		}
	}
	return false
}

// TestE2EUsageMatchesOrigin is target 3: a mixed run (Responses one-shot and streamed, chat,
// Anthropic messages) over 2 gateway processes and 3 workers with two accounts, one gateway
// restarted midway; the usage totals per key and per account equal the origin's own counts of
// requests and input and cached tokens. CODEXPOOL_E2E_USAGE_N sets the count (default 120).
func TestE2EUsageMatchesOrigin(t *testing.T) {
	n := 120
	if s := os.Getenv("CODEXPOOL_E2E_USAGE_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	accts := []codextest.Account{{Name: "acct-1", Token: acctToken("acct-1")}, {Name: "acct-2", Token: acctToken("acct-2")}}
	c := newJetStreamCluster(t, codextest.Options{Words: 5, Latency: 5 * time.Millisecond, Accounts: accts})
	file := writeAccounts(t, fmt.Sprintf("accounts:\n  - {name: acct-1, token: %s}\n  - {name: acct-2, token: %s}\n",
		acctToken("acct-1"), acctToken("acct-2")))
	for _, id := range []string{"wu1", "wu2", "wu3"} {
		c.startWorker(id, "CODEXPOOL_ACCOUNTS="+file)
	}
	keys := writeKeysFile(t)
	gwEnv := []string{"CODEXPOOL_GATEWAY_KEYS=", "CODEXPOOL_GATEWAY_KEYS_FILE=" + keys}
	gw1, base1 := c.startGateway(gwEnv...)
	_, base2 := c.startGateway(gwEnv...)
	var bases sync.Map // index -> base URL; gateway 0 is replaced midway
	bases.Store(0, base1)
	bases.Store(1, base2)

	var sent, done atomic.Int64
	ran := make(chan struct{})
	go func() { defer close(ran); mixedRun(t, n, &bases, &sent, &done) }()
	testutil.WaitFor(t, 120*time.Second, "half the requests", func() bool { return done.Load() >= int64(n/2) })
	gw1.stop(t, 30*time.Second) // SIGTERM: requests in progress finish, new ones go to gateway 2
	_, b := c.startGateway(gwEnv...)
	bases.Store(0, b)
	<-ran
	// Requests straight over NATS reach no gateway: the workers record them, per account, with no key.
	const direct = 6
	for i := range direct {
		if _, err := c.client.Generate(ctxT(t, 30*time.Second), request(fmt.Sprintf("usage e2e direct %d", i), nil), nil); err != nil {
			t.Fatalf("direct request %d: %v", i, err)
		}
	}

	origin := c.sim.Stats()
	var byKey usagestore.Report
	testutil.WaitFor(t, 30*time.Second, "every request in the usage", func() bool {
		byKey = c.usageReport("--by", "key")
		return byKey.Total.Requests >= int64(n+direct)
	})
	byAccount := c.usageReport("--by", "account")
	t.Logf("%d requests (%d sent) and %d straight over NATS; origin: %d responses, %d input, %d cached tokens; usage: %+v",
		n, sent.Load(), direct, origin.Responses, origin.InputTokens, origin.CachedTokens, byKey.Total)
	if byKey.Total.Requests != int64(n+direct) || byKey.Total.Requests != origin.Responses {
		t.Errorf("usage counts %d requests, the run made %d and the origin counted %d", byKey.Total.Requests, n+direct, origin.Responses)
	}
	for _, r := range byKey.Rows {
		if r.Name == "-" && r.Requests != direct {
			t.Errorf("requests without a key: %d, want the %d sent straight over NATS", r.Requests, direct)
		}
	}
	if byKey.Total.Input != origin.InputTokens || byKey.Total.Cached != origin.CachedTokens || byKey.Total.Errors != 0 {
		t.Errorf("usage totals %+v, the origin counted %d input and %d cached tokens", byKey.Total, origin.InputTokens, origin.CachedTokens)
	}
	for _, r := range byAccount.Rows {
		o := origin.Accounts[r.Name]
		if r.Requests != o.Responses || r.Input != o.InputTokens {
			t.Errorf("account %q: usage %d requests %d input tokens, the origin counted %d and %d", r.Name, r.Requests, r.Input, o.Responses, o.InputTokens)
		}
	}
	if len(byAccount.Rows) != 2 {
		t.Errorf("usage by account has rows %+v, want acct-1 and acct-2", byAccount.Rows)
	}
}

// mixedRun sends n requests of four kinds at concurrency 8, half with each key, spread over the
// gateways; a request whose gateway is not there (it is restarting) goes to the other one.
// It reports failures with t.Errorf only: it runs on a goroutine of its own.
func mixedRun(t *testing.T, n int, bases *sync.Map, sent, done *atomic.Int64) {
	kinds := []struct{ path, body string }{
		{"/v1/responses", `{"model":"gpt-5.1-codex","input":"usage e2e %d"}`},
		{"/v1/responses", `{"model":"gpt-5.1-codex","input":"usage e2e stream %d","stream":true}`},
		{"/v1/chat/completions", `{"model":"gpt-5.1-codex","messages":[{"role":"user","content":"usage e2e chat %d"}]}`},
		{"/v1/messages", `{"model":"gpt-5.1-codex","max_tokens":64,"messages":[{"role":"user","content":"usage e2e msg %d"}]}`},
	}
	ctx := ctxT(t, 5*time.Minute)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				k := kinds[i%len(kinds)]
				key := []string{"sk-e2e-free-0002", "sk-e2e-admin-0003"}[i%2]
				for attempt := 0; ; attempt++ {
					b, _ := bases.Load((i + attempt) % 2)
					sent.Add(1)
					st, _, body, err := call(ctx, b.(string), key, k.path, fmt.Sprintf(k.body, i))
					if err != nil && attempt < 20 && ctx.Err() == nil {
						continue // that gateway is restarting: the other one
					}
					if err != nil || st != 200 {
						t.Errorf("request %d (%s): %d %s %v", i, k.path, st, body, err)
					}
					break
				}
				done.Add(1)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}
