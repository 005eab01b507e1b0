package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

// codexCLIEnv names the Codex CLI binary TestE2ECodexCLI runs (examples/codex-cli/ci.sh sets it).
const codexCLIEnv = "CODEXPOOL_TEST_CODEX_CLI"

// TestE2ECodexCLI runs the real Codex CLI (`codex exec`, from the @openai/codex npm package)
// against a gateway process configured as a custom model provider, with a worker process and the
// simulator behind it. The CLI tries to reach hosts of its own, so the test runs only inside a
// network namespace that has nothing but loopback: examples/codex-cli/ci.sh makes one and runs
// this test in it.
func TestE2ECodexCLI(t *testing.T) {
	codexBin := os.Getenv(codexCLIEnv)
	if codexBin == "" {
		t.Skip(codexCLIEnv + " is not set: run examples/codex-cli/ci.sh (installs the Codex CLI, runs this in a loopback-only network namespace)")
	}
	if ifs := networkInterfaces(t); len(ifs) != 1 || ifs[0] != "lo" {
		t.Fatalf("network interfaces %v: the Codex CLI runs only where loopback is all there is (ip netns)", ifs)
	}
	c := newCluster(t, codextest.Options{Words: 8})
	c.startWorker("w1")
	gw, base := c.startGateway() // debug: logs each request body

	home := t.TempDir()
	config := fmt.Sprintf(`model = "gpt-5.1-codex"
model_provider = "codexpool"

[model_providers.codexpool]
name = "codexpool"
base_url = "%s/v1"
wire_api = "responses"
env_key = "POOL_API_KEY"
`, base)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, codexBin, "exec", "--skip-git-repo-check", "Say hello")
	cmd.Dir = t.TempDir()
	cmd.Env = []string{
		"HOME=" + home, "CODEX_HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"POOL_API_KEY=" + gatewayKey, "NO_COLOR=1", "TERM=dumb",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("codex exec \"Say hello\": exit %v\n--- stdout\n%s--- stderr\n%s", cmd.ProcessState, stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("codex exec: %v", err)
	}

	// The simulator's answer is a function of every input_text the CLI sent (its instructions
	// included): read the bodies back from the gateway's debug log.
	var answers []string
	for _, line := range strings.Split(gw.out.String(), "\n") {
		var l struct {
			Msg          string `json:"msg"`
			Body         string `json:"body"`
			Method, Path string
			Status       int
			Code         string
			Stream       bool
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		if l.Msg == "request" {
			t.Logf("gateway: %s %s -> %d %s (stream %v)", l.Method, l.Path, l.Status, l.Code, l.Stream)
		}
		if l.Msg != "request body" {
			continue
		}
		answers = append(answers, codextest.Answer(codextest.PromptOf([]byte(l.Body)), 8))
		t.Logf("the CLI sent %d bytes; top-level fields: %s", len(l.Body), topLevelKeys(l.Body))
	}
	if len(answers) == 0 {
		t.Fatalf("the gateway saw no request body:\n%s", gw.out.String())
	}
	if want := answers[len(answers)-1]; strings.TrimSpace(stdout.String()) != want {
		t.Errorf("codex printed %q, want the simulator's answer %q", strings.TrimSpace(stdout.String()), want)
	}
}

// networkInterfaces lists the network interfaces this process sees.
func networkInterfaces(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatalf("list network interfaces: %v", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// topLevelKeys lists the keys of a JSON object with the type of each value, for the log.
func topLevelKeys(body string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return "(not an object)"
	}
	var parts []string
	for k, v := range m {
		kind := "other"
		switch {
		case len(v) == 0:
		case v[0] == '"':
			kind = "string"
		case v[0] == '{':
			kind = "object"
		case v[0] == '[':
			kind = "array"
		case string(v) == "null":
			kind = "null"
		case string(v) == "true" || string(v) == "false":
			kind = string(v)
		}
		parts = append(parts, k+"="+kind)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
