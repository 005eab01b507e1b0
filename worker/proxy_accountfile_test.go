package worker_test

import (
	"strings"
	"testing"

	"github.com/codexpool/codexpool/worker"
)

// TestProxyAccountsFileField: proxy_url is read per account; a bad one names the account's
// field and line and does not echo the password.
func TestProxyAccountsFileField(t *testing.T) {
	getenv := func(string) string { return "" }
	accts, err := worker.ParseAccounts([]byte("- name: a\n  token: x\n  proxy_url: socks5h://u:pr0xypw@127.0.0.1:1080\n- name: b\n  token: y\n"), getenv)
	if err != nil {
		t.Fatal(err)
	}
	if accts[0].ProxyURL != "socks5h://u:pr0xypw@127.0.0.1:1080" || accts[1].ProxyURL != "" {
		t.Fatalf("ProxyURL = %q, %q", accts[0].ProxyURL, accts[1].ProxyURL)
	}
	for _, bad := range []string{"ftp://u:pr0xypw@h:21", "http://u:pr0xypw@h", "http://u:pr0xypw@h:1/x"} {
		_, err := worker.ParseAccounts([]byte("- name: a\n  token: x\n- name: b\n  token: y\n  proxy_url: \""+bad+"\"\n"), getenv)
		if err == nil || !strings.Contains(err.Error(), "accounts[1].proxy_url (line 5)") || strings.Contains(err.Error(), "pr0xypw") {
			t.Errorf("proxy_url %q: err %v; want accounts[1].proxy_url (line 5) named, no password", bad, err)
		}
	}
}
