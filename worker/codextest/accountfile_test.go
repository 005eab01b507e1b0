package codextest

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseAccounts(t *testing.T) {
	want := []Account{
		{Name: "alice", Token: "sk-a", AccountID: "id-a", UpgradeRate: 2.5, UpgradeBurst: 4, PlanType: "plus",
			Windows: []Window{{Length: 5 * time.Hour, Budget: 100}, {Length: 300 * time.Millisecond}}},
		{Name: "bob"},
	}
	files := map[string]string{
		"yaml list": `
- name: alice
  token: sk-a
  account_id: id-a
  upgrade_rate: 2.5
  upgrade_burst: 4
  plan_type: plus
  windows:
    - {length: 5h, budget: 100}
    - length: 300ms
- name: bob
`,
		"yaml object": `accounts: [{name: alice, token: sk-a, account_id: id-a, upgrade_rate: 2.5, upgrade_burst: 4, plan_type: plus,
  windows: [{length: 5h, budget: 100}, {length: 300ms}]}, {name: bob}]`,
		"json": `[{"name":"alice","token":"sk-a","account_id":"id-a","upgrade_rate":2.5,"upgrade_burst":4,"plan_type":"plus",
  "windows":[{"length":"5h","budget":100},{"length":"300ms"}]},{"name":"bob"}]`,
	}
	for name, data := range files {
		got, err := ParseAccounts([]byte(data))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
		}
	}
}

func TestParseAccountsErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"empty", "", "the file is empty"},
		{"bad length", "- name: a\n  windows: [{length: 5x}]", "accounts[0].windows[0].length (line 2)"},
		{"numeric length", "- name: a\n  windows: [{length: 300}]", "accounts[0].windows[0].length"},
		{"no length", "- name: a\n  windows: [{budget: 3}]", "accounts[0].windows[0].length"},
		{"bad budget", "- name: a\n  windows: [{length: 1h, budget: lots}]", "accounts[0].windows[0].budget"},
		{"negative budget", "- name: a\n  windows: [{length: 1h, budget: -1}]", "accounts[0].windows[0].budget"},
		{"unknown window field", "- name: a\n  windows: [{length: 1h, size: 3}]", "accounts[0].windows[0].size"},
		{"windows not a list", "- name: a\n  windows: 5h", "accounts[0].windows"},
		{"three windows", "- name: a\n  windows: [{length: 1h}, {length: 2h}, {length: 3h}]", "accounts[0].windows: at most 2"},
		{"bad rate", "- name: a\n- name: b\n  upgrade_rate: fast", "accounts[1].upgrade_rate (line 3)"},
		{"bad burst", "- name: a\n  upgrade_burst: 1.5", "accounts[0].upgrade_burst"},
		{"unknown field", "- name: a\n  colour: red", "accounts[0].colour (line 2): unknown field"},
		{"no name", "- token: x", "accounts[0].name: required"},
		{"duplicate name", "- name: a\n- name: a", "accounts[1].name"},
		{"name not a string", "- name: [a]", "accounts[0].name"},
		{"account not an object", "- alice", "accounts[0]"},
		{"not a list", "accounts: 3", "accounts (line 1): want a list"},
		{"unknown top-level key", "users: []", "users (line 1): unknown field"},
		{"empty list", "[]", "the list is empty"},
		{"not YAML", "- [", "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseAccounts([]byte(tt.data))
			if err == nil {
				t.Fatalf("ParseAccounts(%q) succeeded, want an error naming %s", tt.data, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "codextest: accounts file: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to name %q", err, tt.want)
			}
		})
	}
}

func TestLoadAccounts(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "accounts.yaml")
	if err := os.WriteFile(good, []byte("- {name: a, token: t}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadAccounts(good); err != nil || len(got) != 1 || got[0].Token != "t" {
		t.Errorf("LoadAccounts: %+v %v", got, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("- {name: a, windows: [{length: soon}]}\n"), 0o600)
	if _, err := LoadAccounts(bad); err == nil || !strings.Contains(err.Error(), bad+": accounts[0].windows[0].length") {
		t.Errorf("LoadAccounts(bad): %v, want the path and the field", err)
	}
	if _, err := LoadAccounts(filepath.Join(dir, "missing.yaml")); err == nil || !strings.HasPrefix(err.Error(), "codextest: ") {
		t.Errorf("LoadAccounts(missing): %v, want a codextest: error", err)
	}
}
