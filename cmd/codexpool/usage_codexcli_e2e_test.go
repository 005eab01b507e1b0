package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2ECodexCLIPoolQuota is issue 25's target 5: the real Codex CLI through a gateway sees the
// pool's quota, not one account's. It runs where TestE2ECodexCLI does (examples/codex-cli/ci.sh:
// a loopback-only network namespace). Two accounts with 5 h and weekly windows are used
// unevenly; once the gateway's quota shows them, `codex exec` runs, and the rate limits the CLI
// recorded from the reply's x-codex-* headers (its session file's token_count events) must be
// the pool's figures served by GET /backend-api/wham/usage. Every request the CLI made is
// logged, to show what it asks the gateway for (0.169.0: POST /v1/responses, sometimes GET
// /backend-api/wham/usage before it, fetched in the background), and must have been answered 200.
func TestE2ECodexCLIPoolQuota(t *testing.T) {
	codexBin := os.Getenv(codexCLIEnv)
	if codexBin == "" {
		t.Skip(codexCLIEnv + " is not set: run examples/codex-cli/ci.sh")
	}
	if ifs := networkInterfaces(t); len(ifs) != 1 || ifs[0] != "lo" {
		t.Fatalf("network interfaces %v: the Codex CLI runs only where loopback is all there is (ip netns)", ifs)
	}
	wins := func(budget int) []codextest.Window {
		return []codextest.Window{{Length: 5 * time.Hour, Budget: budget}, {Length: 7 * 24 * time.Hour, Budget: 4 * budget}}
	}
	c := newCluster(t, codextest.Options{Words: 8, Accounts: []codextest.Account{
		{Name: "qa", Token: acctToken("qa"), Windows: wins(10)}, {Name: "qb", Token: acctToken("qb"), Windows: wins(40)}}})
	file := writeAccounts(t, fmt.Sprintf("accounts:\n  - {name: qa, token: %s}\n  - {name: qb, token: %s}\n", acctToken("qa"), acctToken("qb")))
	c.startWorker("wq", "CODEXPOOL_ACCOUNTS="+file)
	gw, base := c.startGateway()
	ctx := ctxT(t, 2*time.Minute)
	for i := range 6 { // the accounts' use, as the origin reports it to the worker
		if _, err := c.client.Generate(ctx, request(fmt.Sprintf("quota warm-up %d", i), nil), nil); err != nil {
			t.Fatal(err)
		}
	}
	var pool struct {
		RateLimit struct {
			Primary *struct {
				UsedPercent int `json:"used_percent"`
			} `json:"primary_window"`
		} `json:"rate_limit"`
	}
	testutil.WaitFor(t, 30*time.Second, "the gateway's quota to show the accounts", func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/backend-api/wham/usage", nil)
		req.Header.Set("Authorization", "Bearer "+gatewayKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&pool)
		return pool.RateLimit.Primary != nil && pool.RateLimit.Primary.UsedPercent > 0
	})
	want := pool.RateLimit.Primary.UsedPercent
	for name, a := range c.sim.Stats().Accounts {
		if len(a.Windows) == 0 || int(a.Windows[0].UsedPercent+0.5) == want {
			t.Fatalf("account %s: windows %+v; the pool's %d%% should be neither account's", name, a.Windows, want)
		}
	}

	before := len(gw.out.String())
	home := runCodexExec(t, codexBin, base)
	got := cliRateLimits(t, home)
	if len(got) == 0 {
		t.Fatalf("the CLI recorded no rate limits in %s", home)
	}
	for _, p := range got {
		if d := p - float64(want); d < -1 || d > 1 {
			t.Errorf("the CLI recorded primary used %.1f%%, want the pool's %d%%", p, want)
		}
	}
	for _, line := range strings.Split(gw.out.String()[before:], "\n") {
		var l struct {
			Msg, Method, Path string
			Status            int
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "request" {
			continue
		}
		t.Logf("the CLI asked: %s %s -> %d", l.Method, l.Path, l.Status)
		if l.Status != http.StatusOK {
			t.Errorf("%s %s answered %d", l.Method, l.Path, l.Status)
		}
	}
}

// runCodexExec runs `codex exec "Say hello"` with the gateway as its model provider and as its
// ChatGPT base URL, and returns its CODEX_HOME.
func runCodexExec(t *testing.T, codexBin, base string) string {
	t.Helper()
	home := t.TempDir()
	config := fmt.Sprintf(`model = "gpt-5.1-codex"
model_provider = "codexpool"
chatgpt_base_url = "%s/backend-api"

[model_providers.codexpool]
name = "codexpool"
base_url = "%s/v1"
wire_api = "responses"
env_key = "POOL_API_KEY"
`, base, base)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, codexBin, "exec", "--skip-git-repo-check", "Say hello")
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"HOME=" + home, "CODEX_HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"POOL_API_KEY=" + gatewayKey, "NO_COLOR=1", "TERM=dumb"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("codex exec: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	return home
}

// cliRateLimits returns the primary used percents of the rate limits the CLI recorded in its
// session files (token_count events).
func cliRateLimits(t *testing.T, home string) []float64 {
	t.Helper()
	var out []float64
	_ = filepath.WalkDir(filepath.Join(home, "sessions"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, `"rate_limits"`) {
				continue
			}
			t.Logf("session: %s", line[:min(len(line), 600)])
			var ev struct {
				Payload struct {
					RateLimits *struct {
						Primary *struct {
							UsedPercent float64 `json:"used_percent"`
						} `json:"primary"`
					} `json:"rate_limits"`
				} `json:"payload"`
			}
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Payload.RateLimits != nil && ev.Payload.RateLimits.Primary != nil {
				out = append(out, ev.Payload.RateLimits.Primary.UsedPercent)
			}
		}
		return nil
	})
	return out
}
