package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runWithEnviron runs the program the way main does, with an environment that can list its
// variables, and returns what it wrote to stderr and its error.
func runWithEnviron(t *testing.T, args []string, vars map[string]string) (string, error) {
	t.Helper()
	var list []string
	for k, v := range vars {
		list = append(list, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	e := env{getenv: envOf(vars), environ: func() []string { return list }, stdin: strings.NewReader(""),
		stdout: &stdout, stderr: &stderr}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := e.run(ctx, args)
	return stderr.String(), err
}

// TestUnknownVariables: a misspelt CODEXPOOL_* variable gets a warning naming the setting it
// most likely meant, from the worker and the client commands; names used on purpose get none. The
// worker stops at a missing credentials key file, after the warnings but before any server.
func TestUnknownVariables(t *testing.T) {
	accounts := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(accounts, []byte("- {name: a, token_env: CODEXPOOL_TOKEN_A}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"input":"hi"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stop := map[string]string{
		"CODEXPOOL_NATS_URL": "nats://127.0.0.1:1", "CODEXPOOL_CREDENTIALS_KEY_FILE": "/nonexistent/credentials.key",
		"CODEXPOOL_CODEX_TOKEN": "t", "CODEXPOOL_LOG_FORMAT": "json",
	}
	with := func(more ...string) map[string]string {
		m := map[string]string{}
		for k, v := range stop {
			m[k] = v
		}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		return m
	}
	const typoWarning = "CODEXPOOL_MAX_INFLIGT is not a setting and is ignored: did you mean CODEXPOOL_MAX_INFLIGHT?"
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		want     string // in stderr; "" = no warning at all
		wantErrs string // in the error
	}{
		{"worker typo", []string{"worker"}, with("CODEXPOOL_MAX_INFLIGT", "5"), typoWarning, "CREDENTIALS_KEY_FILE"},
		{"worker section typo", []string{"worker"}, with("CODEXPOOL_NATS_MAX_INFLIGHT", "5"),
			"did you mean CODEXPOOL_MAX_INFLIGHT?", "CREDENTIALS_KEY_FILE"},
		{"worker accounts token_env", []string{"worker"}, with("CODEXPOOL_ACCOUNTS", accounts, "CODEXPOOL_TOKEN_A", "tok"),
			"", "CREDENTIALS_KEY_FILE"},
		{"worker names used on purpose", []string{"worker"}, with("CODEXPOOL_CONFIG", "", "CODEXPOOL_SOAK", "1m",
			"CODEXPOOL_GATEWAY_KEY", "sk-client", "CODEXPOOL_GATEWAY_URL", "http://127.0.0.1:8080/v1"), "", "CREDENTIALS_KEY_FILE"},
		{"ask typo", []string{"ask", "hi"}, with("CODEXPOOL_MAX_INFLIGT", "5"), "codexpool ask: warning: " + typoWarning, "connect to NATS"},
		{"jobs typo", []string{"jobs"}, with("CODEXPOOL_JOBS_STREEM", "S"),
			"codexpool jobs: warning: CODEXPOOL_JOBS_STREEM is not a setting and is ignored: did you mean CODEXPOOL_JOBS_STREAM?", "connect to NATS"},
		{"batch typo", []string{"batch", in, "-o", filepath.Join(t.TempDir(), "out.jsonl")}, with("CODEXPOOL_RESULTS_BUCKT", "R"),
			"did you mean CODEXPOOL_RESULTS_BUCKET?", "connect to NATS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stderr, err := runWithEnviron(t, tt.args, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.wantErrs) {
				t.Fatalf("got %v, want an error containing %q\n%s", err, tt.wantErrs, stderr)
			}
			if tt.want == "" && strings.Contains(stderr, "is not a setting") {
				t.Errorf("stderr warns about a variable used on purpose:\n%s", stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr:\n%s\nwant it to contain %q", stderr, tt.want)
			}
		})
	}
}

// TestConfigWarnsUnknownVariables: `codexpool config` prints the configuration and warns, on
// stderr, about each misspelt variable and about CODEXPOOL_GATEWAY_KEY (a gateway would refuse
// to start); it still exits 0.
func TestConfigWarnsUnknownVariables(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // in stderr; nil = no warning
	}{
		{name: "clean", env: map[string]string{"CODEXPOOL_MAX_INFLIGHT": "5"}},
		{name: "typo", env: map[string]string{"CODEXPOOL_MAX_INFLIGT": "5"},
			want: []string{"codexpool config: warning: CODEXPOOL_MAX_INFLIGT is not a setting and is ignored: did you mean CODEXPOOL_MAX_INFLIGHT?"}},
		{name: "singular gateway key", env: map[string]string{"CODEXPOOL_GATEWAY_KEY": "sk-client"},
			want: []string{"codexpool config: warning: a gateway would not start", "CODEXPOOL_GATEWAY_KEYS"}},
		{name: "near miss of the keys", env: map[string]string{"CODEXPOOL_GATEWAY_KEYZ": "sk-1"},
			want: []string{"CODEXPOOL_GATEWAY_KEYZ is not a setting", "did you mean CODEXPOOL_GATEWAY_KEYS?"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stderr, err := runWithEnviron(t, []string{"config"}, tt.env)
			if err != nil {
				t.Fatalf("config: %v\n%s", err, stderr)
			}
			if tt.want == nil && stderr != "" {
				t.Errorf("stderr %q, want nothing", stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr:\n%s\nwant it to contain %q", stderr, w)
				}
			}
			if strings.Contains(stderr, "sk-") {
				t.Errorf("stderr shows a key's value: %s", stderr)
			}
		})
	}
}

// TestGatewayRefusesMisspeltKeys: the gateway's client keys are CODEXPOOL_GATEWAY_KEYS; a gateway
// started with CODEXPOOL_GATEWAY_KEY (the Codex CLI's env_key in README) or another near miss would
// serve without authentication, so it refuses to start, naming the right variable, before it
// connects anywhere.
func TestGatewayRefusesMisspeltKeys(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		listed  bool // the environment can list its variables (as in main)
		wantErr string
	}{
		{"singular", map[string]string{"CODEXPOOL_GATEWAY_KEY": "sk-1"}, true, "CODEXPOOL_GATEWAY_KEY is set, but the gateway reads its client keys from CODEXPOOL_GATEWAY_KEYS"},
		{"singular, getenv alone", map[string]string{"CODEXPOOL_GATEWAY_KEY": "sk-1"}, false, "reads its client keys from CODEXPOOL_GATEWAY_KEYS"},
		{"typo", map[string]string{"CODEXPOOL_GATEWAY_KEYZ": "sk-1"}, true, "CODEXPOOL_GATEWAY_KEYZ is not a setting: did you mean CODEXPOOL_GATEWAY_KEYS?"},
		{"longer name", map[string]string{"CODEXPOOL_GATEWAY_API_KEYS": "sk-1"}, true, "did you mean CODEXPOOL_GATEWAY_KEYS?"},
		{"both set", map[string]string{"CODEXPOOL_GATEWAY_KEY": "sk-1", "CODEXPOOL_GATEWAY_KEYS": "sk-1"}, true, "CODEXPOOL_GATEWAY_KEY is set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{"CODEXPOOL_NATS_URL": "nats://127.0.0.1:1", "CODEXPOOL_LOG_FORMAT": "json"}
			for k, v := range tt.env {
				vars[k] = v
			}
			var stderr string
			var err error
			if tt.listed {
				stderr, err = runWithEnviron(t, []string{"gateway"}, vars)
			} else {
				var buf bytes.Buffer
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				err = run(ctx, []string{"gateway"}, envOf(vars), strings.NewReader(""), &buf, &buf)
				stderr = buf.String()
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q\n%s", err, tt.wantErr, stderr)
			}
			if strings.Contains(stderr, "NATS") {
				t.Errorf("the gateway tried NATS before refusing:\n%s", stderr)
			}
		})
	}
}

// TestGatewayWarnsUnknownVariables: an unknown variable whose closest setting is not the keys
// is a warning; the gateway stops here at a NATS credentials file that does not exist, which it
// checks right after the variables.
func TestGatewayWarnsUnknownVariables(t *testing.T) {
	stderr, err := runWithEnviron(t, []string{"gateway"}, map[string]string{
		"CODEXPOOL_NATS_URL": "nats://127.0.0.1:1", "CODEXPOOL_LOG_FORMAT": "json",
		"CODEXPOOL_NATS_CREDS": "/nonexistent/user.creds", "CODEXPOOL_GATEWAY_MODEL": "m",
	})
	if err == nil || !strings.Contains(err.Error(), "user.creds") {
		t.Fatalf("got %v, want the missing credentials file error\n%s", err, stderr)
	}
	if want := "CODEXPOOL_GATEWAY_MODEL is not a setting and is ignored: did you mean CODEXPOOL_GATEWAY_MODELS?"; !strings.Contains(stderr, want) {
		t.Errorf("stderr:\n%s\nwant it to contain %q", stderr, want)
	}
}

// TestClientsWithoutServerSayHowToStartOne: ask, jobs and batch with no NATS server name the
// command that starts one and the variable that points elsewhere.
func TestClientsWithoutServerSayHowToStartOne(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"input":"hi"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const hint = "nats: no servers available for connection (is a worker running? start one with `codexpool worker`, or set CODEXPOOL_NATS_URL)"
	for _, args := range [][]string{
		{"ask", "hi"}, {"jobs"}, {"batch", in, "-o", filepath.Join(t.TempDir(), "out.jsonl")},
	} {
		t.Run(args[0], func(t *testing.T) {
			stderr, err := runWithEnviron(t, args, map[string]string{"CODEXPOOL_NATS_URL": "nats://127.0.0.1:1", "XDG_STATE_HOME": t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), hint) {
				t.Fatalf("got %v, want it to end with the hint %q\n%s", err, hint, stderr)
			}
		})
	}
}
