package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/config"
)

// envOf returns a getenv over m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestValidateNamesTheVariable(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*workerConfig)
		want   string
	}{
		{"max inflight", func(c *workerConfig) { c.MaxInflight = 0 }, "CODEXPOOL_MAX_INFLIGHT"},
		{"gate", func(c *workerConfig) { c.GateMode = "turbo" }, "CODEXPOOL_GATE"},
		{"log level", func(c *workerConfig) { c.LogLevel = "loud" }, "CODEXPOOL_LOG_LEVEL"},
		{"log format", func(c *workerConfig) { c.LogFormat = "xml" }, "CODEXPOOL_LOG_FORMAT"},
		{"request timeout", func(c *workerConfig) { c.RequestTimeout = 0 }, "CODEXPOOL_REQUEST_TIMEOUT"},
		{"subject", func(c *workerConfig) { c.Subject = "a b" }, "CODEXPOOL_SUBJECT"},
		{"floor", func(c *workerConfig) { c.WSConnectSpacing = -1 }, "CODEXPOOL_WS_CONNECT_SPACING"},
		{"forbidden cooldown", func(c *workerConfig) { c.ForbiddenCooldown = -1 }, "CODEXPOOL_FORBIDDEN_COOLDOWN"},
		{"ws retry", func(c *workerConfig) { c.WSRetryAfter = 0 }, "CODEXPOOL_WS_RETRY_AFTER"},
		{"refresh url", func(c *workerConfig) { c.CodexRefreshURL = "auth.openai.com/oauth" }, "CODEXPOOL_CODEX_REFRESH_URL"},
		{"client id", func(c *workerConfig) { c.CodexClientID = "" }, "CODEXPOOL_CODEX_CLIENT_ID"},
		{"bucket", func(c *workerConfig) { c.CredentialsBucket = "a.b" }, "CODEXPOOL_CREDENTIALS_BUCKET"},
		{"account cooldown", func(c *workerConfig) { c.AccountCooldown = 0 }, "CODEXPOOL_ACCOUNT_COOLDOWN"},
		{"jobs subject over the request subject", func(c *workerConfig) { c.JobsSubject = "codex" }, "CODEXPOOL_JOBS_SUBJECT"},
		{"cancel subject is the request subject", func(c *workerConfig) { c.CancelSubject = "codex.generate" }, "CODEXPOOL_CANCEL_SUBJECT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaultWorkerConfig()
			tt.mutate(&c)
			err := c.validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.want)
			}
		})
	}
	if err := defaultWorkerConfig().validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestLoadConfigFromEnvironment(t *testing.T) {
	env := map[string]string{
		"CODEXPOOL_MAX_INFLIGHT": "7", "CODEXPOOL_REQUEST_TIMEOUT": "90s", "CODEXPOOL_GATE": "fixed", "CODEXPOOL_WS_REUSE": "false",
	}
	c, _, err := loadWorkerConfig(envOf(env), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxInflight != 7 || c.RequestTimeout != 90*time.Second || c.GateMode != "fixed" || c.WSReuse {
		t.Fatalf("got %+v", c)
	}
	if c.Model != "gpt-5.1-codex" || c.Subject != "codex.generate" || c.ShutdownGrace != 30*time.Second {
		t.Fatalf("defaults not applied: %+v", c)
	}
	env["CODEXPOOL_MAX_INFLIGHT"] = "many"
	if _, _, err := loadWorkerConfig(envOf(env), ""); err == nil || !strings.Contains(err.Error(), "CODEXPOOL_MAX_INFLIGHT") {
		t.Fatalf("bad number: err = %v, want one naming CODEXPOOL_MAX_INFLIGHT", err)
	}
}

// TestLoadConfigIgnoresTheProcessEnvironment: settings come through the injected getenv only.
func TestLoadConfigIgnoresTheProcessEnvironment(t *testing.T) {
	t.Setenv("CODEXPOOL_MAX_INFLIGHT", "7")
	t.Setenv("CODEXPOOL_CONFIG", "/nonexistent/codexpool.yaml")
	c, st, err := loadWorkerConfig(envOf(nil), "")
	if err != nil || c != defaultWorkerConfig() {
		t.Fatalf("got %+v, %v; want the defaults", c, err)
	}
	for _, s := range st.List {
		if s.Source != config.Default {
			t.Errorf("%s: source %s, want default", s.Key, s.Source)
		}
	}
}

func TestPrintUsageListsEverySetting(t *testing.T) {
	var b bytes.Buffer
	defaults := defaultWorkerConfig()
	if err := printSettings(&b, &defaults); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"CODEXPOOL_NATS_URL", "CODEXPOOL_GATE", "CODEXPOOL_SHUTDOWN_GRACE", "CODEXPOOL_LOG_FORMAT",
		"CODEXPOOL_WS_CONNECT_SPACING_MS", "nats.url", "gate.ws_connect_spacing", "codex.model"} {
		if !strings.Contains(b.String(), name) {
			t.Errorf("usage lacks %s:\n%s", name, b.String())
		}
	}
	if !strings.Contains(b.String(), "256") {
		t.Errorf("usage lacks the default of MAX_INFLIGHT:\n%s", b.String())
	}
}

func TestAccountsSetting(t *testing.T) {
	const secret = "sk-SECRET-from-env-123456"
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	getenv := func(k string) string {
		if k == "TOKEN_B" {
			return secret
		}
		return ""
	}
	c := defaultWorkerConfig()
	if accts, err := c.accounts(getenv); err != nil || accts != nil {
		t.Fatalf("no CODEXPOOL_ACCOUNTS: got %v, %v; want no accounts (the CODEXPOOL_CODEX_* account)", accts, err)
	}
	if wc := c.worker(nil); len(wc.Accounts) != 0 || wc.AuthFile == "" || wc.Cooldown != 30*time.Second {
		t.Fatalf("worker config without accounts: %+v", wc)
	}

	c.AccountsFile = write("good.yaml", "- {name: a, auth_file: a.json, max_used_percent: 90}\n- {name: b, token_env: TOKEN_B}\n")
	accts, err := c.accounts(getenv)
	if err != nil {
		t.Fatal(err)
	}
	wc := c.worker(accts)
	if len(wc.Accounts) != 2 || wc.Accounts[0].AuthFile != dir+"/a.json" || wc.Accounts[1].Token != secret || wc.Accounts[0].MaxUsedPercent != 90 {
		t.Fatalf("worker accounts %+v", wc.Accounts)
	}

	bad := map[string]string{
		"- {name: a, token_env: TOKEN_B}\n- {name: a, token: " + secret + "}\n": `CODEXPOOL_ACCOUNTS: accounts file ` + dir + `/bad.yaml: accounts[1].name (line 2): "a" is also the name of accounts[0]`,
		"- name: a\n  token: " + secret + "\n  max_used_percent: 101\n":         "accounts[0].max_used_percent (line 3)",
		"- name: a\n  token_env: NOT_SET\n":                                     "accounts[0].token_env (line 2): environment variable NOT_SET is not set",
	}
	for data, want := range bad {
		c.AccountsFile = write("bad.yaml", data)
		_, err := c.accounts(getenv)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("error leaks the token: %v", err)
		}
	}
}

// TestEverySettingHasHelp: each setting has a help line in confighelp.go, and each help line
// belongs to a setting.
func TestEverySettingHasHelp(t *testing.T) {
	used := map[string]bool{}
	w, g := defaultWorkerConfig(), defaultGatewayConfig()
	for _, spec := range []any{&w, &g} {
		list, err := config.Fields(envPrefix, spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.Desc == "" {
				t.Errorf("%s (%s) has no help in confighelp.go", s.Key, s.Env)
			}
			used[s.Key] = true
		}
	}
	for _, help := range []map[string]string{settingHelp, gatewayHelp} {
		for key := range help {
			if !used[key] {
				t.Errorf("confighelp.go: %s is no setting", key)
			}
		}
	}
}
