package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/config"
)

// writeConfig writes a settings file for the test and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "codexpool.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigFile loads the worker's settings from a file and an environment: values, sources,
// the older _MS variables, and errors naming the line and the key.
func TestConfigFile(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		env     map[string]string
		check   func(t *testing.T, c workerConfig, st config.Settings)
		wantErr []string // substrings of the error; none = success
	}{
		{name: "file, then env over it",
			file: "nats:\n  subject: pool.generate\n  max_inflight: 7\ncodex:\n  model: m-file\ngate:\n  forbidden_budget: 20s\n",
			env:  map[string]string{"CODEXPOOL_MODEL": "m-env"},
			check: func(t *testing.T, c workerConfig, st config.Settings) {
				if c.Subject != "pool.generate" || c.MaxInflight != 7 || c.Model != "m-env" || c.ForbiddenBudget != 20*time.Second {
					t.Errorf("got subject %q, max_inflight %d, model %q, budget %s", c.Subject, c.MaxInflight, c.Model, c.ForbiddenBudget)
				}
				wantSource(t, st, "CODEXPOOL_SUBJECT", config.File, 2)
				wantSource(t, st, "CODEXPOOL_MAX_INFLIGHT", config.File, 3)
				wantSource(t, st, "CODEXPOOL_MODEL", config.Env, 0)
				wantSource(t, st, "CODEXPOOL_GATE", config.Default, 0)
			}},
		{name: "durations in the file", file: "gate:\n  ws_connect_spacing: 250ms\n  forbidden_cooldown: 1.5s\n",
			check: func(t *testing.T, c workerConfig, _ config.Settings) {
				if c.WSConnectSpacing != 250*time.Millisecond || c.ForbiddenCooldown != 1500*time.Millisecond {
					t.Errorf("got spacing %s, cooldown %s", c.WSConnectSpacing, c.ForbiddenCooldown)
				}
			}},
		{name: "older _MS variables are milliseconds",
			env: map[string]string{"CODEXPOOL_WS_CONNECT_SPACING_MS": "250", "CODEXPOOL_FORBIDDEN_COOLDOWN_MS": "0"},
			check: func(t *testing.T, c workerConfig, st config.Settings) {
				if c.WSConnectSpacing != 250*time.Millisecond || c.ForbiddenCooldown != 0 {
					t.Errorf("got spacing %s, cooldown %s; want 250ms, 0", c.WSConnectSpacing, c.ForbiddenCooldown)
				}
				if s, _ := st.Lookup("CODEXPOOL_WS_CONNECT_SPACING"); s.Source != config.Env || s.Var != "CODEXPOOL_WS_CONNECT_SPACING_MS" {
					t.Errorf("spacing set by %s (%s), want env CODEXPOOL_WS_CONNECT_SPACING_MS", s.Var, s.Source)
				}
			}},
		{name: "the new name wins over the _MS one",
			env: map[string]string{"CODEXPOOL_WS_CONNECT_SPACING_MS": "250", "CODEXPOOL_WS_CONNECT_SPACING": "1s"},
			check: func(t *testing.T, c workerConfig, _ config.Settings) {
				if c.WSConnectSpacing != time.Second {
					t.Errorf("got spacing %s, want 1s", c.WSConnectSpacing)
				}
			}},
		{name: "an _MS variable over the file", file: "gate:\n  forbidden_cooldown: 1s\n",
			env: map[string]string{"CODEXPOOL_FORBIDDEN_COOLDOWN_MS": "20"},
			check: func(t *testing.T, c workerConfig, _ config.Settings) {
				if c.ForbiddenCooldown != 20*time.Millisecond {
					t.Errorf("got cooldown %s, want 20ms", c.ForbiddenCooldown)
				}
			}},
		{name: "a gateway key in a worker's file", file: "gateway:\n  addr: 0.0.0.0:9000\nlog:\n  level: debug\n",
			check: func(t *testing.T, c workerConfig, _ config.Settings) {
				if c.LogLevel != "debug" {
					t.Errorf("got log level %q, want debug", c.LogLevel)
				}
			}},
		{name: "an empty value keeps the default", file: "nats:\n  subject:\ncodex:\n",
			check: func(t *testing.T, c workerConfig, st config.Settings) {
				wantSource(t, st, "CODEXPOOL_SUBJECT", config.Default, 0)
			}},
		{name: "an _MS variable that is not an integer", env: map[string]string{"CODEXPOOL_FORBIDDEN_COOLDOWN_MS": "1s"},
			wantErr: []string{"CODEXPOOL_FORBIDDEN_COOLDOWN_MS", "milliseconds"}},
		{name: "bad integer", file: "nats:\n  subject: a\n  max_inflight: many\n",
			wantErr: []string{"line 3", "nats.max_inflight", `"many"`}},
		{name: "a duration without a unit", file: "gate:\n  forbidden_budget: 10\n",
			wantErr: []string{"line 2", "gate.forbidden_budget", "duration"}},
		{name: "bad bool", file: "\ncodex:\n  ws_reuse: maybe\n", wantErr: []string{"line 3", "codex.ws_reuse", "true or false"}},
		{name: "yaml syntax", file: "nats:\n  url: [\n", wantErr: []string{"codexpool.yaml", "line"}},
		{name: "a list for a value", file: "nats:\n  url:\n    - a\n", wantErr: []string{"line 3", "nats.url", "single value"}},
		{name: "a key twice", file: "nats:\n  url: a\n  url: b\n", wantErr: []string{"line 3", "nats.url", "line 2"}},
		{name: "not sections", file: "url: x\n", wantErr: []string{"line 1", "section"}},
		{name: "unknown key", file: "nats:\n  ur: nats://x\n", wantErr: []string{"line 2", `unknown key "nats.ur"`, `did you mean "nats.url"`}},
		{name: "a key in the wrong section", file: "codex:\n  max_inflight: 3\n",
			wantErr: []string{"line 2", `"codex.max_inflight"`, `did you mean "nats.max_inflight"`}},
		{name: "unknown section", file: "nats:\n  url: x\nnatz:\n  url: x\n", wantErr: []string{"line 3", `unknown section "natz"`, `"nats"`}},
		{name: "an invalid value names the key and line", file: "nats:\n  subject: a\n\n  max_inflight: 0\n",
			wantErr: []string{"CODEXPOOL_MAX_INFLIGHT", "nats.max_inflight in ", "line 4", "at least 1"}},
		{name: "an invalid _MS value names the variable that set it", env: map[string]string{"CODEXPOOL_WS_CONNECT_SPACING_MS": "-5"},
			wantErr: []string{"CODEXPOOL_WS_CONNECT_SPACING", "set as CODEXPOOL_WS_CONNECT_SPACING_MS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeConfig(t, tt.file)
			}
			c, st, err := loadWorkerConfig(envOf(tt.env), path)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("got success, want an error containing %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("got %q, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want success", err)
			}
			tt.check(t, c, st)
		})
	}
	if _, _, err := loadWorkerConfig(envOf(nil), "/nonexistent/codexpool.yaml"); err == nil || !strings.Contains(err.Error(), "/nonexistent/codexpool.yaml") {
		t.Errorf("missing file: got %v, want an error naming it", err)
	}
}

func wantSource(t *testing.T, st config.Settings, env string, src config.Source, line int) {
	t.Helper()
	s, ok := st.Lookup(env)
	if !ok {
		t.Fatalf("no setting %s", env)
	}
	if s.Source != src || s.Line != line {
		t.Errorf("%s: source %s line %d, want %s line %d", env, s.Source, s.Line, src, line)
	}
}

// TestConfigCommand runs `codexpool config` on a file plus an env override: every value with its
// source, no secret in the output, the file from --config or CODEXPOOL_CONFIG.
func TestConfigCommand(t *testing.T) {
	const (
		password = "pw-SECRET-1"
		fileTok  = "tok-SECRET-file"
		envTok   = "tok-SECRET-env"
		credKey  = "ck-SECRET"
		gwKey    = "sk-SECRET-gw"
	)
	path := writeConfig(t, "nats:\n  url: nats://u:"+password+"@n1:4222\n  password: "+password+"\n"+
		"codex:\n  token: "+fileTok+"\n  credentials_key: "+credKey+"\n  model: m-file\n"+
		"gateway:\n  keys: "+gwKey+"\n  addr: 127.0.0.1:9000\n")
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{name: "--config", args: []string{"config", "--config", path}, env: map[string]string{"CODEXPOOL_CODEX_TOKEN": envTok}},
		{name: "CODEXPOOL_CONFIG", args: []string{"config"}, env: map[string]string{"CODEXPOOL_CONFIG": path, "CODEXPOOL_CODEX_TOKEN": envTok}},
		{name: "--config over CODEXPOOL_CONFIG", args: []string{"config", "--config", path},
			env: map[string]string{"CODEXPOOL_CONFIG": "/nonexistent", "CODEXPOOL_CODEX_TOKEN": envTok}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := run(context.Background(), tt.args, envOf(tt.env), strings.NewReader(""), &stdout, &stderr); err != nil {
				t.Fatalf("run: %v (stderr %s)", err, stderr.String())
			}
			out := stdout.String()
			for _, secret := range []string{password, fileTok, envTok, credKey, gwKey} {
				if strings.Contains(out, secret) {
					t.Errorf("output shows the secret %q:\n%s", secret, out)
				}
			}
			if !strings.Contains(out, "# file: "+path) {
				t.Errorf("output does not name the file:\n%s", out)
			}
			for _, row := range []struct{ key, value, source string }{
				{"codex.model", "m-file", "file:7"},
				{"codex.token", "<redacted>", "env"},
				{"codex.credentials_key", "<redacted>", "file:6"},
				{"nats.url", "nats://<redacted>@n1:4222", "file:2"},
				{"nats.password", "<redacted>", "file:3"},
				{"nats.subject", "codex.generate", "default"},
				{"gateway.addr", "127.0.0.1:9000", "file:10"},
				{"gateway.keys", "<redacted>", "file:9"},
				{"gateway.shutdown_grace", "30s", "default"},
			} {
				if !hasRow(out, row.key, row.value, row.source) {
					t.Errorf("output lacks %s = %s from %s:\n%s", row.key, row.value, row.source, out)
				}
			}
		})
	}
}

// hasRow reports whether out has the row key, value, source.
func hasRow(out, key, value, source string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == key && f[1] == value && f[2] == source {
			return true
		}
	}
	return false
}

func TestConfigCommandErrors(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		wantCode int
		wantErr  string
	}{
		{name: "unknown key", file: "log:\n  levle: debug\n", wantCode: 2, wantErr: `did you mean "log.level"`},
		{name: "invalid value", file: "gateway:\n  keepalive: 0s\n", wantCode: 1, wantErr: "gateway.keepalive in "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"config", "--config", writeConfig(t, tt.file)}, envOf(nil),
				strings.NewReader(""), &stdout, &stderr)
			var ee exitError
			code := 1
			if errors.As(err, &ee) {
				code = ee.code
			}
			if err == nil || code != tt.wantCode || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v (exit %d), want exit %d with an error containing %q", err, code, tt.wantCode, tt.wantErr)
			}
		})
	}
}

// TestExampleFileIsCurrent: codexpool.example.yaml is what `codexpool config --example` prints,
// and loading it gives the defaults.
func TestExampleFileIsCurrent(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"config", "--example"}, envOf(nil), strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	const path = "../../codexpool.example.yaml"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != stdout.String() {
		t.Fatalf("%s is stale: regenerate it with\n\tgo run ./cmd/codexpool config --example > codexpool.example.yaml", path)
	}
	c, st, err := loadWorkerConfig(envOf(nil), path)
	if err != nil || c != defaultWorkerConfig() {
		t.Fatalf("loading the example: %+v, %v; want the defaults", c, err)
	}
	for _, s := range st.List {
		if s.Source != config.File {
			t.Errorf("the example does not set %s", s.Key)
		}
	}
	g, gst, err := loadGatewaySettings(envOf(nil), path)
	if err != nil || g != defaultGatewayConfig() {
		t.Fatalf("loading the example for the gateway: %+v, %v; want the defaults", g, err)
	}
	for _, s := range gst.List {
		if s.Source != config.File {
			t.Errorf("the example does not set %s", s.Key)
		}
	}
}

// TestGatewayConfigFile: the gateway reads the same file; its keys are redacted nowhere but read.
func TestGatewayConfigFile(t *testing.T) {
	path := writeConfig(t, "gateway:\n  addr: 0.0.0.0:9000\n  keys: sk-a,sk-b\n  keepalive: 5s\nnats:\n  max_inflight: 3\n")
	c, keys, err := loadGatewayConfig(envOf(map[string]string{"CODEXPOOL_GATEWAY_KEEPALIVE": "7s"}), path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "0.0.0.0:9000" || len(keys) != 2 || c.KeepAlive != 7*time.Second {
		t.Errorf("got addr %q, %d keys, keep-alive %s; want 0.0.0.0:9000, 2, 7s", c.Addr, len(keys), c.KeepAlive)
	}
}

// TestConfigurationPageMatchesTheCode: each row of docs/configuration.md's settings tables that
// names a file key names the code's key for that variable, and a default written as code is the
// code's default.
func TestConfigurationPageMatchesTheCode(t *testing.T) {
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	w, g := defaultWorkerConfig(), defaultGatewayConfig()
	byEnv := map[string][]config.Setting{}
	for _, spec := range []any{&w, &g} {
		list, err := config.Fields(envPrefix, spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			byEnv[s.Env] = append(byEnv[s.Env], s)
		}
	}
	rows := 0
	for _, line := range strings.Split(string(raw), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 4 || !strings.HasPrefix(cells[0], "| `CODEXPOOL_") || strings.Contains(cells[0], ",") {
			continue
		}
		env, key, def := strings.Trim(cells[0], "| `"), strings.Trim(cells[1], "`"), cells[2]
		settings := byEnv[env]
		if key == "" || len(settings) == 0 {
			continue // an older _MS name, or a variable of another table
		}
		rows++
		if !slices.ContainsFunc(settings, func(s config.Setting) bool { return s.Key == key }) {
			t.Errorf("docs/configuration.md: %s has file key %q, the code %q", env, key, settings[0].Key)
		}
		want := settings[0].Value()
		switch {
		case def == "empty" && want != "":
			t.Errorf("docs/configuration.md: %s default empty, the code %q", env, want)
		case strings.HasPrefix(def, "`") && !sameValue(strings.Trim(def, "`"), want) && !strings.Contains(def, "<"):
			if env != "CODEXPOOL_EMBEDDED_NATS_STORE" { // the code computes it from $HOME
				t.Errorf("docs/configuration.md: %s default %s, the code %q", env, def, want)
			}
		}
	}
	if rows < 50 {
		t.Errorf("checked %d rows of docs/configuration.md's tables, want the whole worker and gateway tables", rows)
	}
}

// sameValue compares two spellings of a value: durations by their length (60s = 1m).
func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	da, errA := time.ParseDuration(a)
	db, errB := time.ParseDuration(b)
	return errA == nil && errB == nil && da == db
}

// TestClientSubcommandsReadTheFile: ask, batch and jobs read the pool settings from --config.
func TestClientSubcommandsReadTheFile(t *testing.T) {
	path := writeConfig(t, "nats:\n  subjekt: x\n")
	tests := []struct {
		name string
		args []string
	}{
		{name: "ask", args: []string{"ask", "--config", path, "hello"}},
		{name: "jobs", args: []string{"jobs", "--config", path}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, envOf(nil), strings.NewReader(""), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), `did you mean "nats.subject"`) {
				t.Fatalf("got %v, want the file's unknown key", err)
			}
		})
	}
}
