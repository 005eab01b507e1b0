package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestSimFlagErrors: bad --accounts files and --write-login values fail with exit code 2 and a
// message naming what is wrong, before anything listens.
func TestSimFlagErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "- {name: alice, token: t}\n")
	tests := []struct {
		name       string
		args       []string
		wantMsg    string
		wantErrOut string
	}{
		{name: "bad window length", args: []string{"--accounts", write("a.yaml", "- name: a\n  windows: [{length: 5x, budget: 1}]\n")},
			wantMsg: "accounts[0].windows[0].length"},
		{name: "unknown field", args: []string{"--accounts", write("b.json", `[{"name":"a","budjet":3}]`)}, wantMsg: "accounts[0].budjet"},
		{name: "bad burst", args: []string{"--accounts", write("c.yaml", "- {name: a, upgrade_burst: many}\n")}, wantMsg: "accounts[0].upgrade_burst"},
		{name: "missing file", args: []string{"--accounts", filepath.Join(dir, "nope.yaml")}, wantMsg: "nope.yaml"},
		{name: "login without accounts", args: []string{"--write-login", "alice=" + filepath.Join(dir, "x.json")}, wantMsg: `no account "alice"`},
		{name: "login of an unknown account", args: []string{"--accounts", good, "--write-login", "bob=" + filepath.Join(dir, "x.json")}, wantMsg: `no account "bob"`},
		{name: "login not NAME=PATH", args: []string{"--write-login", "alice"}, wantErrOut: "want NAME=PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"sim", "--addr", "127.0.0.1:0"}, tt.args...)
			err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
			var ee exitError
			if !errors.As(err, &ee) || ee.code != 2 {
				t.Fatalf("run(%q) = %v, want exit code 2", args, err)
			}
			if !strings.Contains(ee.msg, tt.wantMsg) || !strings.Contains(stderr.String(), tt.wantErrOut) {
				t.Errorf("message %q stderr %q, want %q / %q", ee.msg, stderr.String(), tt.wantMsg, tt.wantErrOut)
			}
			if strings.Contains(stdout.String(), "origin") {
				t.Errorf("stdout %q: the simulator started", stdout.String())
			}
		})
	}
}

// TestSimAccountsAndLogin runs `codexpool sim` with an accounts file, --write-login, --ws-off and
// --token-lifetime, and uses the written auth.json against it over loopback.
func TestSimAccountsAndLogin(t *testing.T) {
	dir := t.TempDir()
	accounts := filepath.Join(dir, "accounts.yaml")
	os.WriteFile(accounts, []byte("accounts:\n  - name: alice\n    account_id: acct-1\n    windows: [{length: 5h, budget: 10}]\n"), 0o600)
	authPath := filepath.Join(dir, "alice", "auth.json")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testutil.SyncBuffer
	done := make(chan error, 1)
	args := []string{"sim", "--addr", "127.0.0.1:0", "--accounts", accounts, "--write-login", "alice=" + authPath,
		"--ws-off", "--token-lifetime", "2m", "--words", "3"}
	go func() {
		done <- run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	}()

	urlRE := regexp.MustCompile(`http origin (\S+)`)
	var httpURL string
	deadline := time.Now().Add(10 * time.Second)
	for httpURL == "" {
		if m := urlRE.FindStringSubmatch(stdout.String()); m != nil && strings.Contains(stdout.String(), "login for alice") {
			httpURL = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("sim exited: %v\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond): // polling interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("no URL printed: %q", stdout.String())
		}
	}
	if !strings.Contains(stdout.String(), "refresh http://") {
		t.Errorf("stdout %q lacks the refresh URL", stdout.String())
	}

	fi, err := os.Stat(authPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("auth.json mode %v, want 0600", fi.Mode().Perm())
	}
	var auth struct {
		AuthMode string            `json:"auth_mode"`
		Tokens   map[string]string `json:"tokens"`
	}
	b, _ := os.ReadFile(authPath)
	if err := json.Unmarshal(b, &auth); err != nil || auth.AuthMode != "chatgpt" || auth.Tokens["account_id"] != "acct-1" {
		t.Fatalf("auth.json %s: %v", b, err)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(auth.Tokens["access_token"], ".")[1])
	var claims struct{ Iat, Exp int64 }
	json.Unmarshal(payload, &claims)
	if d := claims.Exp - claims.Iat; d < 120 || d > 121 {
		t.Errorf("access token lives %ds, want 120 (--token-lifetime 2m)", d)
	}

	// --ws-off: the upgrade gets 426; HTTP streaming with the login's token works.
	wsURL := "ws" + strings.TrimPrefix(httpURL, "http")
	h := http.Header{"Authorization": {"Bearer " + auth.Tokens["access_token"]}}
	if c, resp, err := websocket.DefaultDialer.Dial(wsURL, h); err == nil || resp == nil || resp.StatusCode != 426 {
		if c != nil {
			c.Close()
		}
		t.Errorf("upgrade with --ws-off: err %v resp %v, want 426", err, resp)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, httpURL, strings.NewReader(`{"model":"m","input":"hi","stream":true}`))
	req.Header = h.Clone()
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			last = name
		}
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || last != "response.completed" || resp.Header.Get("x-codex-primary-used-percent") != "0" {
		t.Errorf("HTTP streaming: %d, last event %q, used-percent %q; want 200, response.completed, 0",
			resp.StatusCode, last, resp.Header.Get("x-codex-primary-used-percent"))
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("sim: %v", err)
	}
	out := stdout.String()
	if !strings.Contains(out, "final stats") || !strings.Contains(out, `"sse_responses":1`) || !strings.Contains(out, `"upgrades_426":1`) {
		t.Errorf("final stats %q, want 1 SSE response and 1 upgrade refused with 426", out)
	}
}

// TestBindSimFlags: every simulator flag lands in its Options field.
func TestBindSimFlags(t *testing.T) {
	o := codextest.Options{Words: 5}
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	bindSimFlags(fs, &o)
	err := fs.Parse([]string{"--latency=2s", "--ttft=300ms", "--upgrade-rate=5", "--upgrade-burst=7",
		"--retry-after=1s", "--max-conns=9", "--max-conn-age=1h", "--token=t0k",
		"--token-lifetime=5m", "--refresh-latency=20ms", "--ws-off"})
	if err != nil {
		t.Fatal(err)
	}
	want := codextest.Options{Latency: 2 * time.Second, TTFT: 300 * time.Millisecond, Words: 5, UpgradeRate: 5,
		UpgradeBurst: 7, RetryAfter: time.Second, MaxConns: 9, MaxConnAge: time.Hour, Token: "t0k",
		TokenLifetime: 5 * time.Minute, RefreshLatency: 20 * time.Millisecond, WSOff: true}
	if got := o; got.Latency != want.Latency || got.TTFT != want.TTFT || got.Words != want.Words ||
		got.UpgradeRate != want.UpgradeRate || got.UpgradeBurst != want.UpgradeBurst || got.RetryAfter != want.RetryAfter ||
		got.MaxConns != want.MaxConns || got.MaxConnAge != want.MaxConnAge || got.Token != want.Token ||
		got.TokenLifetime != want.TokenLifetime || got.RefreshLatency != want.RefreshLatency || got.WSOff != want.WSOff {
		t.Errorf("after flags %+v, want %+v", got, want)
	}
}

// TestSimHelpListsEveryFlag: `sim --help` documents every flag it parses, the simulator's own
// included, so moving their binding cannot drop one from the usage.
func TestSimHelpListsEveryFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	_ = run(context.Background(), []string{"sim", "--help"}, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	help := stdout.String() + stderr.String()
	for _, f := range []string{"addr", "accounts", "write-login", "latency", "ttft", "words", "upgrade-rate",
		"upgrade-burst", "retry-after", "max-conns", "max-conn-age", "token", "token-lifetime",
		"refresh-latency", "ws-off", "tool-call", "no-prompt-cache"} {
		if !strings.Contains(help, "\n  -"+f+" ") && !strings.Contains(help, "\n  -"+f+"\n") {
			t.Errorf("sim --help does not list -%s:\n%s", f, help)
		}
	}
}

// TestBindSimToolFlags: --tool-call parses into Options.ToolCalls (repeatable, in order), bad
// values fail naming the problem, and --no-prompt-cache sets NoPromptCache.
func TestBindSimToolFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []codextest.ToolCall
		noCache bool
		wantErr string
	}{
		{name: "two calls", args: []string{`--tool-call=name=Bash args={"command":"ls"}`, "--tool-call=name=Read", "--no-prompt-cache"},
			want: []codextest.ToolCall{{Name: "Bash", Arguments: `{"command":"ls"}`}, {Name: "Read"}}, noCache: true},
		{name: "bad args", args: []string{"--tool-call=name=Bash args=[1]"}, wantErr: "JSON object"},
		{name: "no name", args: []string{"--tool-call=Bash"}, wantErr: "name=NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o codextest.Options
			fs := flag.NewFlagSet("sim", flag.ContinueOnError)
			fs.SetOutput(&bytes.Buffer{})
			bindSimToolFlags(fs, &o)
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(o.ToolCalls, tt.want) || o.NoPromptCache != tt.noCache {
				t.Errorf("Parse(%q): %v, ToolCalls %+v NoPromptCache %v; want %+v %v", tt.args, err, o.ToolCalls, o.NoPromptCache, tt.want, tt.noCache)
			}
		})
	}
}

// startSim runs `codexpool sim` with args until the test ends and returns its WebSocket origin
// and control URLs, as printed.
func startSim(t *testing.T, args ...string) (origin, control string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"sim", "--addr", "127.0.0.1:0"}, args...), func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sim: %v", err)
		}
	})
	re := regexp.MustCompile(`origin (ws://\S+)\n(?s:.*)control (\S+)/stats`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			return m[1], m[2]
		}
		select {
		case err := <-done:
			t.Fatalf("sim exited: %v\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond): // polling interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("no URLs printed: %q", stdout.String())
		}
	}
}

// TestSimToolCallAndOverload runs `codexpool sim --tool-call`: a request declaring the tool is
// answered with that function call; after POST /_sim/fault?kind=overloaded the next response
// ends with the in-stream server_is_overloaded error.
func TestSimToolCallAndOverload(t *testing.T) {
	origin, control := startSim(t, `--tool-call=name=Bash args={"command":"echo hi > f.txt"}`)
	c, _, err := websocket.DefaultDialer.Dial(origin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := `{"type":"response.create","model":"m","input":"hi","tools":[{"type":"function","name":"Bash"}]}`
	last := func() map[string]any {
		t.Helper()
		if err := c.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		for {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, data, err := c.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			var ev map[string]any
			json.Unmarshal(data, &ev)
			switch ev["type"] {
			case "response.completed", "response.failed", "error":
				return ev
			}
		}
	}
	ev := last()
	out, _ := ev["response"].(map[string]any)["output"].([]any)
	if len(out) != 1 || out[0].(map[string]any)["name"] != "Bash" || out[0].(map[string]any)["arguments"] != `{"command":"echo hi > f.txt"}` {
		t.Fatalf("response.completed output %v, want the --tool-call Bash call", out)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Post(control+"/fault?n=1&kind=overloaded", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /_sim/fault: %d", resp.StatusCode)
	}
	if ev := last(); ev["type"] != "error" || ev["error"].(map[string]any)["code"] != "server_is_overloaded" {
		t.Errorf("after the overloaded fault: %v, want the server_is_overloaded error event", ev)
	}
}
