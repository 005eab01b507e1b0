package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProxyConfigRedacted: codexpool config shows codex.proxy_url and every account's proxy with
// its user information as <redacted>, accounts without one on the pool default; no password is
// printed, on stdout or stderr.
func TestProxyConfigRedacted(t *testing.T) {
	accts := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(accts, []byte(`accounts:
  - {name: alice, token: t-alice, proxy_url: "http://al:pw-alice-1@127.0.0.1:3128"}
  - {name: bob, token: t-bob, proxy_url: "socks5h://bo:pw-bob-2@127.0.0.1:1080"}
  - {name: carol, token: t-carol}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	env := envOf(map[string]string{"CODEXPOOL_ACCOUNTS": accts, "CODEXPOOL_PROXY_URL": "https://pool:pw-pool-3@127.0.0.1:3129"})
	if err := run(context.Background(), []string{"config"}, env, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("config: %v\n%s", err, stderr.String())
	}
	out := stdout.String() + stderr.String()
	for _, pw := range []string{"pw-alice-1", "pw-bob-2", "pw-pool-3"} {
		if strings.Contains(out, pw) {
			t.Errorf("config prints the proxy password %q:\n%s", pw, out)
		}
	}
	for _, want := range []string{
		"https://<redacted>@127.0.0.1:3129",
		"alice    http://<redacted>@127.0.0.1:3128",
		"bob      socks5h://<redacted>@127.0.0.1:1080",
		"carol    https://<redacted>@127.0.0.1:3129 (codex.proxy_url)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config output lacks %q:\n%s", want, out)
		}
	}
}
