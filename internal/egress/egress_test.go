package egress

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/internal/egress/proxytest"
)

func TestProxyParse(t *testing.T) {
	for _, raw := range []string{
		"http://u:pw@127.0.0.1:3128", "https://h:443", "socks5://u:pw@h:1080", "socks5h://h:1080",
	} {
		if _, err := Parse("proxy_url", raw); err != nil {
			t.Errorf("Parse(%q): %v", raw, err)
		}
	}
	for _, raw := range []string{
		"ftp://u:secretpw@h:21", "http://u:secretpw@h", "socks5://u:secretpw@:1080",
		"http://u:secretpw@h:1/path", "u:secretpw@h:1", "http://u:secretpw@h:1?x=1", "http://u:secretpw@h:1\x7f",
	} {
		_, err := Parse("accounts[2].proxy_url", raw)
		if err == nil {
			t.Errorf("Parse(%q) accepted", raw)
			continue
		}
		if !strings.HasPrefix(err.Error(), "accounts[2].proxy_url: ") || strings.Contains(err.Error(), "secretpw") {
			t.Errorf("Parse(%q) error %q: want the field named and no password", raw, err)
		}
	}
}

func TestProxyRedact(t *testing.T) {
	if got := Redact("socks5://alice:secretpw@h:1080"); strings.Contains(got, "secretpw") || !strings.Contains(got, "alice") {
		t.Errorf("Redact = %q", got)
	}
	if got := Redact("http://u:secretpw@h:1\x7f"); strings.Contains(got, "secretpw") {
		t.Errorf("Redact(invalid) = %q", got)
	}
}

// TestProxyConnectCountsUser dials an origin through a real loopback CONNECT proxy (Apply on an
// http.Transport), which counts tunnels per proxy user; bad credentials are an *Error with the
// 407 and without the password.
func TestProxyConnectCountsUser(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer origin.Close()
	px := proxytest.NewConnect(t, "alice", "secretpw")

	tlsc := origin.Client().Transport.(*http.Transport).TLSClientConfig
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: tlsc}
	Apply(tr, px.URLWith("alice", "secretpw"))
	c := &http.Client{Transport: tr}
	for range 3 {
		resp, err := c.Get(origin.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := px.Tunnels.Load(); n != 3 {
		t.Fatalf("tunnels through the proxy = %d, want 3", n)
	}

	tr = &http.Transport{TLSClientConfig: tlsc}
	Apply(tr, px.URLWith("alice", "wrongpw"))
	_, err := (&http.Client{Transport: tr}).Get(origin.URL)
	pe, ok := AsError(err)
	if !ok || pe.Status != http.StatusProxyAuthRequired || strings.Contains(err.Error(), "wrongpw") {
		t.Fatalf("bad credentials: err %v; want an *Error with status 407, without the password", err)
	}
}
