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
// simulator behind it: "Say hello" prints the simulator's answer, and a tool loop runs the CLI's
// own shell tool (exec_command; the simulator asks for it) in its workspace-write sandbox, writes
// a file and quotes the tool's output. Every request the CLI makes goes through a recording proxy
// and is logged without secrets. The CLI tries to reach hosts of its own, so the test runs only
// inside a network namespace that has nothing but loopback: examples/codex-cli/ci.sh makes one
// and runs this test in it. The simulator is strict: it refuses, as the origin does, any field
// the origin does not read.
func TestE2ECodexCLI(t *testing.T) {
	codexBin := os.Getenv(codexCLIEnv)
	if codexBin == "" {
		t.Skip(codexCLIEnv + " is not set: run examples/codex-cli/ci.sh (installs the Codex CLI, runs this in a loopback-only network namespace)")
	}
	if ifs := networkInterfaces(t); len(ifs) != 1 || ifs[0] != "lo" {
		t.Fatalf("network interfaces %v: the Codex CLI runs only where loopback is all there is (ip netns)", ifs)
	}
	c := newCluster(t, codextest.Options{Words: 8, Strict: true}) // refuses any field the origin refuses
	c.startWorker("w1")
	_, base := c.startGateway()
	rec := newRecorder(t, base)
	cx := codexCLI{bin: codexBin, home: t.TempDir()}
	cx.configure(t, rec.url)

	t.Run("say hello", func(t *testing.T) {
		out := cx.run(t, t.TempDir(), "Say hello")
		body := rec.lastWith(t, "/v1/responses", "Say hello")
		t.Logf("the CLI sent %d bytes; top-level fields: %s", len(body), topLevelKeys(string(body)))
		if want := codextest.Answer(codextest.PromptOf(body), 8); out != want {
			t.Errorf("codex printed %q, want the simulator's answer %q", out, want)
		}
	})
	t.Run("shell tool", func(t *testing.T) {
		dir, mark := t.TempDir(), "codex-ran-"+nonce(t)
		ask := `Write the file. [sim:tool name=exec_command args={"cmd":"echo ` + mark + ` > out.txt && cat out.txt"}]`
		out := cx.run(t, dir, ask, "--sandbox", "workspace-write")
		got, err := os.ReadFile(filepath.Join(dir, "out.txt"))
		if err != nil || string(got) != mark+"\n" {
			t.Errorf("out.txt: %q, %v; want %q written by the CLI's shell tool", got, err, mark+"\n")
		}
		if !strings.Contains(out, "Tool exec_command returned: ") || !strings.Contains(out, mark) {
			t.Errorf("codex printed %q, want the final answer quoting the tool's output (%q)", out, mark)
		}
		if !strings.Contains(string(rec.lastWith(t, "/v1/responses", `"function_call_output"`)), mark) {
			t.Error("no request sent the tool's output back as a function_call_output")
		}
	})
	rec.check(t, "/v1/")
}

// codexCLI runs `codex exec` with a CODEX_HOME whose config names the gateway as its provider.
type codexCLI struct{ bin, home string }

func (cx codexCLI) configure(t *testing.T, base string) {
	t.Helper()
	config := fmt.Sprintf(`model = "gpt-5.1-codex"
model_provider = "codexpool"

[model_providers.codexpool]
name = "codexpool"
base_url = "%s/v1"
wire_api = "responses"
env_key = "POOL_API_KEY"
`, base)
	if err := os.WriteFile(filepath.Join(cx.home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}

// run runs `codex exec --skip-git-repo-check args... prompt` in dir and returns its trimmed
// output (the final answer); a non-zero exit fails the test.
func (cx codexCLI) run(t *testing.T, dir, prompt string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append(append([]string{"exec", "--skip-git-repo-check"}, args...), prompt)
	cmd := exec.CommandContext(ctx, cx.bin, argv...)
	cmd.Dir = dir
	cmd.Env = []string{
		"HOME=" + cx.home, "CODEX_HOME=" + cx.home, "PATH=" + os.Getenv("PATH"),
		"POOL_API_KEY=" + gatewayKey, "NO_COLOR=1", "TERM=dumb",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("codex %q: exit %v\n--- stdout\n%s--- stderr\n%s", argv, cmd.ProcessState, stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("codex exec: %v", err)
	}
	return strings.TrimSpace(stdout.String())
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
