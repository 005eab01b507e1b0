package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// The accounts tests run real worker processes with CODEXPOOL_ACCOUNTS against the simulator as
// a multi-account origin.

func acctToken(name string) string { return "e2e-" + name + "-secret-0123456789" }

// writeAccounts writes a worker accounts file and returns its path.
func writeAccounts(t *testing.T, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestE2EAccountsSmallBudget is target 1 with two worker processes: three accounts, one with a
// small budget; 90 requests at concurrency 10 all succeed; after the small account's exhaustion
// it gets at most one more request per worker.
func TestE2EAccountsSmallBudget(t *testing.T) {
	const budget = 4
	small := codextest.Account{Name: "small", Token: acctToken("small"), Windows: []codextest.Window{{Length: time.Hour, Budget: budget}}}
	c := newCluster(t, codextest.Options{Words: 3, Latency: 50 * time.Millisecond, Accounts: []codextest.Account{
		{Name: "big1", Token: acctToken("big1")}, {Name: "big2", Token: acctToken("big2")}, small,
	}})
	file := writeAccounts(t, fmt.Sprintf(`accounts:
  - {name: big1, token: %s}
  - {name: big2, token_env: BIG2_TOKEN}
  - {name: small, token: %s}
`, acctToken("big1"), acctToken("small")))
	metricsAddr := opsFreeAddr(t)
	c.startWorker("wa1", "CODEXPOOL_ACCOUNTS="+file, "BIG2_TOKEN="+acctToken("big2"), "CODEXPOOL_METRICS_ADDR="+metricsAddr)
	c.startWorker("wa2", "CODEXPOOL_ACCOUNTS="+file, "BIG2_TOKEN="+acctToken("big2"))

	jobs := make(chan int)
	var mu sync.Mutex
	failures := map[string]int{}
	ok := 0
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for i := range jobs {
				prompt := fmt.Sprintf("accounts e2e %d", i)
				reply, err := c.client.Generate(ctxT(t, 60*time.Second), request(prompt, nil), nil)
				mu.Lock()
				switch {
				case err != nil:
					failures[err.Error()]++
				case reply.OutputText != codextest.Answer(prompt, 3):
					failures["wrong answer"]++
				default:
					ok++
				}
				mu.Unlock()
			}
		})
	}
	for i := range 90 {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	st := c.sim.Stats()
	t.Logf("90 requests over 2 workers: %d ok; small completed %d (budget %d), refused %d; big1 %d, big2 %d",
		ok, st.Accounts["small"].Completed, budget, st.Accounts["small"].UsageLimited,
		st.Accounts["big1"].Completed, st.Accounts["big2"].Completed)
	if ok != 90 {
		t.Errorf("%d of 90 succeeded, want 90; failures: %v", ok, failures)
	}
	if got := st.Accounts["small"].Completed; got < budget {
		t.Errorf("small completed %d, want its budget of %d used up", got, budget)
	}
	if got := st.Accounts["small"].UsageLimited; got > 2 {
		t.Errorf("small was sent %d requests after its exhaustion, want at most one per worker (2)", got)
	}
	if st.Accounts["big1"].Completed == 0 || st.Accounts["big2"].Completed == 0 {
		t.Errorf("a big account was not used: %+v", st.Accounts)
	}

	m := opsScrape(t, "http://"+metricsAddr)
	for _, name := range []string{"big1", "big2", "small"} {
		if _, ok := m[`codexpool_account_requests_total{account="`+name+`"}`]; !ok {
			t.Errorf("/metrics has no codexpool_account_requests_total for %s", name)
		}
	}
	if _, ok := m[`codexpool_account_used_percent{account="small",limit="codex",window_minutes="60"}`]; !ok {
		t.Error("/metrics has no used percent for the small account's 60-minute window")
	}
	var lines []string
	for k, v := range m {
		if strings.HasPrefix(k, "codexpool_account_") && v != 0 {
			lines = append(lines, fmt.Sprintf("%s %v", k, v))
		}
	}
	slices.Sort(lines)
	t.Logf("worker wa1, non-zero per-account series:\n%s", strings.Join(lines, "\n"))
}

// TestE2EAccountsAllExhausted is target 2 through NATS and the real binary: with both accounts
// exhausted the next request is answered 429 within 100 ms, naming an account, with a retry time
// between 1 s and the earliest reset, and without upstream traffic; after the reset, requests are
// served again by the same worker.
func TestE2EAccountsAllExhausted(t *testing.T) {
	win := []codextest.Window{{Length: 5 * time.Second, Budget: 2}}
	c := newCluster(t, codextest.Options{Words: 3, Accounts: []codextest.Account{
		{Name: "a", Token: acctToken("a"), Windows: win}, {Name: "b", Token: acctToken("b"), Windows: win},
	}})
	file := writeAccounts(t, fmt.Sprintf("- {name: a, token: %s}\n- {name: b, token: %s}\n", acctToken("a"), acctToken("b")))
	p := c.startWorker("wx", "CODEXPOOL_ACCOUNTS="+file)

	var err error
	served := 0
	for ; served < 10; served++ {
		if _, err = c.client.Generate(ctxT(t, 30*time.Second), request(fmt.Sprintf("use %d", served), nil), nil); err != nil {
			break
		}
	}
	e, ok := schemas.AsError(err)
	if served != 4 || !ok || e.Code != schemas.CodeUpstreamRateLimited {
		t.Fatalf("after %d successes: %v; want 4 successes, then 429 upstream_rate_limited", served, err)
	}
	earliest := c.sim.Accounts.Stats("a").Windows[0].ResetAt
	if r := c.sim.Accounts.Stats("b").Windows[0].ResetAt; r.Before(earliest) {
		earliest = r
	}
	before := c.sim.Stats()
	start := time.Now()
	_, err = c.client.Generate(ctxT(t, 30*time.Second), request("fast", nil), nil)
	took := time.Since(start)
	e, ok = schemas.AsError(err)
	if !ok || e.Status != 429 || e.Code != schemas.CodeUpstreamRateLimited || (e.Account != "a" && e.Account != "b") {
		t.Fatalf("got %v (account %q), want 429 upstream_rate_limited naming a or b", err, e.Account)
	}
	if limit := time.Until(earliest) + time.Second; e.RetryAfter < time.Second || e.RetryAfter > limit {
		t.Errorf("retry_after %s, want between 1s and the earliest reset (%s away, whole seconds)", e.RetryAfter, limit)
	}
	if took > 100*time.Millisecond {
		t.Errorf("answered in %s, want within 100ms", took)
	}
	if after := c.sim.Stats(); after.Responses != before.Responses || after.UpgradesAccepted != before.UpgradesAccepted || after.UsageLimited != before.UsageLimited {
		t.Errorf("upstream traffic while every account cools down: %+v -> %+v", before, after)
	}
	t.Logf("all exhausted: 429 in %s, retry_after %s, account %q: %s", took, e.RetryAfter, e.Account, e.Message)

	deadline := time.Now().Add(e.RetryAfter + 5*time.Second)
	for {
		_, err := c.client.Generate(ctxT(t, 30*time.Second), request("back again", nil), nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not served again %s after the 429: %v", time.Since(start), err)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition with a deadline
	}
	t.Logf("served again %s after the fast 429, same worker process", time.Since(start).Round(time.Millisecond))
	if out := p.out.String(); !strings.Contains(out, `"msg":"account cooling down"`) || strings.Contains(out, acctToken("a")) {
		t.Errorf("worker log: want an \"account cooling down\" line and no token")
	}
}

// TestE2EAccountsFileRefused: a bad accounts file stops the worker at start, naming the file's
// field and line, and never printing a token.
func TestE2EAccountsFileRefused(t *testing.T) {
	c := newCluster(t, codextest.Options{})
	tests := []struct {
		name, data, want string
	}{
		{"duplicate", fmt.Sprintf("- {name: a, token: %s}\n- {name: a, token: %s}\n", acctToken("a"), acctToken("b")),
			`accounts[1].name (line 2): "a" is also the name of accounts[0]`},
		{"no credentials", "- name: a\n  max_used_percent: 50\n", `accounts[0] (line 1): account "a" has no credentials`},
		{"unset variable", "- name: a\n  token_env: NOT_SET_ANYWHERE\n", "accounts[0].token_env (line 2): environment variable NOT_SET_ANYWHERE is not set or empty"},
		{"bad percent", fmt.Sprintf("- name: a\n  token: %s\n  max_used_percent: 150\n", acctToken("a")), "accounts[0].max_used_percent (line 3)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeAccounts(t, tt.data)
			p := c.startWorkerNoWait("bad-"+strings.ReplaceAll(tt.name, " ", "-"), "CODEXPOOL_ACCOUNTS="+file)
			p.waitExit(t, 30*time.Second)
			out := p.out.String()
			if p.err == nil || !strings.Contains(out, "CODEXPOOL_ACCOUNTS") || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %v, output:\n%s\nwant a failure naming CODEXPOOL_ACCOUNTS and %q", p.err, out, tt.want)
			}
			if strings.Contains(out, acctToken("a")) || strings.Contains(out, acctToken("b")) {
				t.Fatalf("the output leaks a token:\n%s", out)
			}
		})
	}
}

// TestBenchAccounts runs `codexpool bench --accounts --account-counts` (the target 3 setup, small
// and fast): one row per account count, every request answered by the workers using that many
// of the simulator's accounts.
func TestBenchAccounts(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	file := writeAccounts(t, fmt.Sprintf("- {name: a, token: %s, upgrade_rate: 50}\n- {name: b, token: %s, upgrade_rate: 50}\n", acctToken("a"), acctToken("b")))
	out, err := exec.Command(binPath, "bench", "--accounts", file, "--account-counts", "1,2", "--reuse=false",
		"--requests", "20", "--concurrency", "10", "--latency", "50ms", "--json", "--quiet").Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var results []struct {
		Accounts int `json:"accounts"`
		OK       int `json:"ok"`
		Failed   int `json:"failed"`
		Upgrades int `json:"upgrades_accepted"`
	}
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if len(results) != 2 || results[0].Accounts != 1 || results[1].Accounts != 2 {
		t.Fatalf("results %+v, want one row for 1 account and one for 2", results)
	}
	for _, r := range results {
		if r.OK != 20 || r.Failed != 0 || r.Upgrades != 20 {
			t.Errorf("%d accounts: %+v, want 20 ok over 20 upgrades", r.Accounts, r)
		}
	}
}
