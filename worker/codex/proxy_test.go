package codex

import (
	"context"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/internal/egress/proxytest"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestProxyConnectCarriesEveryUpgrade: with ProxyURL set, every upgrade the simulator accepts
// came through the proxy's tunnels (NoReuse: one upgrade per generation).
func TestProxyConnectCarriesEveryUpgrade(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	px := proxytest.NewConnect(t, "acct1", "s3cretpw")
	c := newClient(t, srv, Config{NoReuse: true, ProxyURL: px.URLWith("acct1", "s3cretpw")})
	for i := range 3 {
		if _, err := c.Generate(context.Background(), createFrame("hi", nil), nil); err != nil {
			t.Fatalf("Generate %d: %v", i, err)
		}
	}
	if n, up := px.Tunnels.Load(), srv.Stats().UpgradesAccepted; n != 3 || up != 3 {
		t.Errorf("tunnels %d, simulator upgrades %d; want 3, 3", n, up)
	}
}

// TestProxyBadCredentialsFailWithoutPassword: a proxy that refuses the credentials fails the
// generation, and the error does not carry the password.
func TestProxyBadCredentialsFailWithoutPassword(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	px := proxytest.NewConnect(t, "acct1", "s3cretpw")
	c := newClient(t, srv, Config{NoReuse: true, ProxyURL: px.URLWith("acct1", "wr0ngpw")})
	_, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
	if err == nil || strings.Contains(err.Error(), "wr0ngpw") {
		t.Fatalf("Generate through a refusing proxy: err %v; want an error without the password", err)
	}
	if up := srv.Stats().UpgradesAccepted; up != 0 {
		t.Errorf("simulator upgrades %d, want 0 (nothing direct)", up)
	}
}

// TestProxyURLValidated: New rejects a bad proxy URL naming the field, without the password.
func TestProxyURLValidated(t *testing.T) {
	_, err := New(Config{Token: "t", ProxyURL: "ftp://u:s3cretpw@h:21"})
	if err == nil || !strings.Contains(err.Error(), "proxy_url") || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("New: err %v; want proxy_url named, no password", err)
	}
}
