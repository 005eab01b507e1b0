package worker_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/worker"
)

const secretToken = "sk-SECRET-abcdef123456"

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestParseAccounts(t *testing.T) {
	getenv := env(map[string]string{"TOKEN_B": secretToken})
	want := []worker.Account{
		{Name: "a", AuthFile: "~/.codex/auth.json"},
		{Name: "b", Token: secretToken, MaxUsedPercent: 80},
		{Name: "c", Token: secretToken, AccountID: "acct-1", MaxUsedPercent: 12.5},
	}
	files := map[string]string{
		"YAML list": `
- name: a
  auth_file: ~/.codex/auth.json
- name: b
  token_env: TOKEN_B
  max_used_percent: 80
- {name: c, token: ` + secretToken + `, account_id: acct-1, max_used_percent: 12.5}
`,
		"YAML object": `accounts:
  - name: a
    auth_file: ~/.codex/auth.json
  - name: b
    token_env: TOKEN_B
    max_used_percent: 80
  - name: c
    token: ` + secretToken + `
    account_id: acct-1
    max_used_percent: 12.5
`,
		"JSON": `{"accounts": [
  {"name": "a", "auth_file": "~/.codex/auth.json"},
  {"name": "b", "token_env": "TOKEN_B", "max_used_percent": 80},
  {"name": "c", "token": "` + secretToken + `", "account_id": "acct-1", "max_used_percent": 12.5}]}`,
	}
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			got, err := worker.ParseAccounts([]byte(data), getenv)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d accounts, want %d", len(got), len(want))
			}
			for i := range want {
				// Compare the exported fields (the credentials' source for logs is internal).
				g, w := got[i], want[i]
				if g.Name != w.Name || g.Token != w.Token || g.AccountID != w.AccountID || g.AuthFile != w.AuthFile || g.MaxUsedPercent != w.MaxUsedPercent {
					t.Errorf("account %d: got %+v, want %+v", i, redact(g), redact(w))
				}
			}
		})
	}
}

func redact(a worker.Account) worker.Account {
	if a.Token != "" {
		a.Token = "(set)"
	}
	return a
}

func TestParseAccountsErrors(t *testing.T) {
	getenv := env(map[string]string{"EMPTY": "", "TOKEN": secretToken})
	tests := []struct {
		name, data, want string
	}{
		{"empty file", "  \n", "empty"},
		{"not a list", "name: a\n", "name (line 1): unknown field"},
		{"object without accounts", "{}", "accounts (line 1): required"},
		{"empty list", "[]", "the list is empty"},
		{"list of strings", "- a\n", "accounts[0] (line 1): want an object"},
		{"no name", "- token: " + secretToken + "\n", "accounts[0].name (line 1): required"},
		{"empty name", "- name: \"\"\n  token: x\n", "accounts[0].name (line 1): must not be empty"},
		{"name not a string", "- name: 12\n  token: x\n", "accounts[0].name (line 1): want a string"},
		{"no credentials", "- name: a\n  token: x\n- name: b\n  max_used_percent: 50\n", `accounts[1] (line 3): account "b" has no credentials`},
		{"two credentials", "- name: a\n  token: " + secretToken + "\n  auth_file: /x.json\n", `accounts[0] (line 1): account "a" has token and auth_file: give exactly one`},
		{"unknown field", "- name: a\n  token: x\n  tokne_env: T\n", "accounts[0].tokne_env (line 3): unknown field"},
		{"duplicate names", "- name: a\n  token: x\n- name: b\n  token: y\n- name: a\n  token: z\n", `accounts[2].name (line 5): "a" is also the name of accounts[0]`},
		{"unset variable", "- name: a\n  token_env: MISSING\n", "accounts[0].token_env (line 2): environment variable MISSING is not set or empty"},
		{"empty variable", "- name: a\n  token_env: EMPTY\n", "accounts[0].token_env (line 2): environment variable EMPTY is not set or empty"},
		{"percent too high", "- name: a\n  token: x\n  max_used_percent: 120\n", "accounts[0].max_used_percent (line 3): want a number above 0 and at most 100, got 120"},
		{"percent zero", "- name: a\n  token: x\n  max_used_percent: 0\n", "accounts[0].max_used_percent (line 3)"},
		{"percent with a sign", "- name: a\n  token: x\n  max_used_percent: 80%\n", `accounts[0].max_used_percent (line 3): want a number above 0 and at most 100, got "80%"`},
		{"token is a list", "- name: a\n  token: [" + secretToken + "]\n", "accounts[0].token (line 2): want a single value"},
		{"max_concurrent zero", "- name: a\n  token: x\n  max_concurrent: 0\n", "accounts[0].max_concurrent (line 3): want a whole number of at least 1, got \"0\""},
		{"max_concurrent fraction", "- name: a\n  token: x\n  max_concurrent: 1.5\n", "accounts[0].max_concurrent (line 3)"},
		{"bad YAML", "- name: a\n  token: " + secretToken + "\n   bad: [\n", "line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := worker.ParseAccounts([]byte(tt.data), getenv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secretToken) || strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("error leaks the token: %v", err)
			}
		})
	}
}

func TestLoadAccountsResolvesAuthFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "accounts.yaml")
	data := "- {name: rel, auth_file: logins/a.json}\n- {name: abs, auth_file: /etc/b.json}\n- {name: home, auth_file: ~/.codex/auth.json}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := worker.LoadAccounts(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{got[0].AuthFile, got[1].AuthFile, got[2].AuthFile}
	if want := []string{filepath.Join(dir, "logins/a.json"), "/etc/b.json", "~/.codex/auth.json"}; !reflect.DeepEqual(files, want) {
		t.Errorf("auth files %q, want %q", files, want)
	}
	if _, err := worker.LoadAccounts(filepath.Join(dir, "missing.yaml"), nil); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: got %v, want an error naming it", err)
	}
	if err := os.WriteFile(path, []byte("- name: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.LoadAccounts(path, nil); err == nil || !strings.Contains(err.Error(), path+": accounts[0] (line 1)") {
		t.Errorf("bad file: got %v, want an error naming the file, the field and the line", err)
	}
}

func TestParseAccountsMaxConcurrent(t *testing.T) {
	got, err := worker.ParseAccounts([]byte("- {name: a, token: x, max_concurrent: 2}\n- {name: b, token: y}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].MaxConcurrent != 2 || got[1].MaxConcurrent != 0 {
		t.Errorf("max_concurrent %d and %d, want 2 and 0 (none)", got[0].MaxConcurrent, got[1].MaxConcurrent)
	}
}
