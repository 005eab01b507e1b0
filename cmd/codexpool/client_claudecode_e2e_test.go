package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

// claudeCodeEnv names the Claude Code binary TestE2EClaudeCode runs (examples/claude-code/ci.sh
// sets it).
const claudeCodeEnv = "CODEXPOOL_TEST_CLAUDE_CODE"

// TestE2EClaudeCode runs the real Claude Code CLI (`claude -p`, from the @anthropic-ai/claude-code
// npm package) with ANTHROPIC_BASE_URL at a gateway process, a worker process and the simulator
// behind it: "Say hello" prints the simulator's answer, and a tool loop runs the CLI's own Bash
// tool (the simulator asks for it), writes a file and quotes the tool's output. Every request the
// CLI makes goes through a recording proxy in this test and is logged without secrets. The CLI
// tries to reach hosts of its own, so the test runs only inside a network namespace with nothing
// but loopback: examples/claude-code/ci.sh makes one and runs this test in it. The simulator is
// strict: a field of the CLI's the translation let through, and the origin refuses, fails it.
func TestE2EClaudeCode(t *testing.T) {
	claude := os.Getenv(claudeCodeEnv)
	if claude == "" {
		t.Skip(claudeCodeEnv + " is not set: run examples/claude-code/ci.sh (installs Claude Code, runs this in a loopback-only network namespace)")
	}
	if ifs := networkInterfaces(t); len(ifs) != 1 || ifs[0] != "lo" {
		t.Fatalf("network interfaces %v: Claude Code runs only where loopback is all there is (ip netns)", ifs)
	}
	c := newCluster(t, codextest.Options{Words: 8, Strict: true}) // refuses any field the origin refuses
	c.startWorker("w1")
	_, base := c.startGateway()
	rec := newRecorder(t, base)
	cc := claudeCode{bin: claude, base: rec.url, home: t.TempDir()}

	t.Run("say hello", func(t *testing.T) {
		out := cc.run(t, t.TempDir(), "Say hello")
		body := rec.lastWith(t, "/v1/messages?", "Say hello")
		if want := simAnswer(t, body, 8); out != want {
			t.Errorf("claude printed %q, want the simulator's answer %q", out, want)
		}
	})
	t.Run("tool loop", func(t *testing.T) {
		dir, mark := t.TempDir(), "tool-ran-"+nonce(t)
		ask := `Write the file. [sim:tool name=Bash args={"command":"echo ` + mark + ` > out.txt && cat out.txt"}]`
		out := cc.run(t, dir, ask, "--allowedTools", "Bash")
		got, err := os.ReadFile(filepath.Join(dir, "out.txt"))
		if err != nil || string(got) != mark+"\n" {
			t.Errorf("out.txt: %q, %v; want %q written by Claude Code's Bash tool", got, err, mark+"\n")
		}
		if want := "Tool Bash returned: " + mark; !strings.Contains(out, want) {
			t.Errorf("claude printed %q, want the final answer quoting the tool's output (%q)", out, want)
		}
		if !strings.Contains(string(rec.lastWith(t, "/v1/messages?", `"tool_result"`)), mark) {
			t.Error("no request sent the tool's output back as a tool_result")
		}
	})
	rec.check(t, "/v1/messages")
}

// claudeCode runs the CLI non-interactively against base with the gateway's key, with env added
// to its environment.
type claudeCode struct {
	bin, base, home string
	env             []string
}

// run runs `claude -p prompt args...` in dir and returns its trimmed output; a non-zero exit
// fails the test.
func (cc claudeCode) run(t *testing.T, dir, prompt string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cc.bin, append([]string{"-p", prompt}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{
		"HOME=" + cc.home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1", "TERM=dumb",
		"ANTHROPIC_BASE_URL=" + cc.base, "ANTHROPIC_API_KEY=" + gatewayKey,
		// No telemetry, error reports, update checks or connectivity probes: only the API calls.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
	}
	cmd.Env = append(cmd.Env, cc.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("claude -p %q %v: exit %v\n--- stdout\n%s--- stderr\n%s", prompt, args, cmd.ProcessState, stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("claude: %v", err)
	}
	return strings.TrimSpace(stdout.String())
}

// simAnswer is the simulator's answer to a /v1/messages body, as the gateway translates it.
func simAnswer(t *testing.T, body []byte, words int) string {
	t.Helper()
	a, err := anthropicAnswer(body, words)
	if err != nil {
		t.Fatalf("the captured request: %v", err)
	}
	return a
}

func nonce(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A recorder is a reverse proxy in front of the gateway that keeps every request a client makes.
type recorder struct {
	url string

	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

func newRecorder(t *testing.T, target string) *recorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1 // server-sent events pass through as they come
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.RequestURI(), r.Header.Clone(), body})
		rec.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.url = srv.URL
	return rec
}

func (rec *recorder) all() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.reqs)
}

// lastWith returns the body of the last POST whose path (with its query) starts with path and
// whose body contains s.
func (rec *recorder) lastWith(t *testing.T, path, s string) []byte {
	t.Helper()
	reqs := rec.all()
	for i := len(reqs) - 1; i >= 0; i-- {
		r := reqs[i]
		if r.method == http.MethodPost && (r.path == strings.TrimSuffix(path, "?") || strings.HasPrefix(r.path, path)) &&
			bytes.Contains(r.body, []byte(s)) {
			return r.body
		}
	}
	t.Fatalf("no POST %s with %q among %d requests", path, s, len(reqs))
	return nil
}

// check logs every request (headers with secrets redacted) and checks each carried the key and
// went to a path under prefix.
func (rec *recorder) check(t *testing.T, prefix string) {
	t.Helper()
	for _, r := range rec.all() {
		if r.header.Get("X-Api-Key") != gatewayKey && r.header.Get("Authorization") != "Bearer "+gatewayKey {
			t.Errorf("%s %s: no gateway key in x-api-key or Authorization", r.method, r.path)
		}
		if !strings.HasPrefix(r.path, prefix) {
			t.Errorf("%s %s: a request outside %s", r.method, r.path, prefix)
		}
		t.Logf("captured: %s %s (%d bytes; model %s)\n%s", r.method, r.path, len(r.body), modelOf(r.body), redacted(r.header))
	}
}

func modelOf(body []byte) string {
	var m struct{ Model string }
	_ = json.Unmarshal(body, &m)
	return m.Model
}

// redacted lists h's headers, one a line, sorted, with the values of secret ones replaced.
func redacted(h http.Header) string {
	var lines []string
	for k, vs := range h {
		v := strings.Join(vs, ", ")
		switch strings.ToLower(k) {
		case "x-api-key", "authorization", "cookie", "proxy-authorization":
			v = "[redacted]"
		}
		lines = append(lines, "  "+k+": "+v)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
