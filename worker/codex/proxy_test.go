package codex

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/internal/egress"
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

// TestProxySOCKS5CarriesEveryUpgrade: through a real SOCKS5 server (microsocks) with
// user:password, socks5:// (names resolved here) and socks5h:// (resolved by the proxy) carry
// every upgrade; the simulator accepts no other.
func TestProxySOCKS5CarriesEveryUpgrade(t *testing.T) {
	for _, scheme := range []string{"socks5", "socks5h"} {
		t.Run(scheme, func(t *testing.T) {
			srv := newSim(t, codextest.Options{})
			px := proxytest.NewSOCKS5(t, "acct1", "s0cksPW", "")
			c := newClient(t, srv, Config{NoReuse: true, ProxyURL: px.URL(scheme, "acct1", "s0cksPW")})
			for i := range 3 {
				if _, err := c.Generate(context.Background(), createFrame("hi", nil), nil); err != nil {
					t.Fatalf("Generate %d: %v", i, err)
				}
			}
			if n, up := px.WaitTunnels(3, 5*time.Second), srv.Stats().UpgradesAccepted; n != 3 || up != 3 {
				t.Errorf("tunnels %d, simulator upgrades %d; want 3, 3", n, up)
			}
		})
	}
}

// TestProxyFailureIsTyped: a proxy that refuses the credentials (CONNECT 407, SOCKS5 auth),
// refuses connections, or does not answer fails the upgrade with an error egress.AsError finds
// (what the worker cools the account down for), without the password.
func TestProxyFailureIsTyped(t *testing.T) {
	connect := proxytest.NewConnect(t, "acct1", "s3cretpw")
	socks := proxytest.NewSOCKS5(t, "acct1", "s3cretpw", "")
	dead := proxytest.NewConnect(t, "acct1", "s3cretpw")
	dead.Kill()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close() // accepts (the kernel's backlog) and never answers
	for _, tc := range []struct {
		name, url string
		status    int
		timeout   bool
	}{
		{name: "connect 407", url: connect.URLWith("acct1", "wr0ngpw"), status: 407},
		{name: "socks5 auth", url: socks.URL("socks5h", "acct1", "wr0ngpw")},
		{name: "refused", url: dead.URLWith("acct1", "wr0ngpw")},
		{name: "timeout", url: "http://acct1:wr0ngpw@" + silent.Addr().String(), timeout: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newSim(t, codextest.Options{})
			c := newClient(t, srv, Config{NoReuse: true, ProxyURL: tc.url,
				Policy: gate.Policy{ConnectTimeout: 300 * time.Millisecond}})
			_, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
			pe, ok := egress.AsError(err)
			switch {
			case !ok:
				t.Fatalf("err %v: want an egress.Error in its chain", err)
			case strings.Contains(err.Error(), "wr0ngpw"):
				t.Fatalf("err %q carries the password", err)
			case pe.Status != tc.status || pe.Timeout() != tc.timeout:
				t.Fatalf("err %q: status %d timeout %v, want %d %v", err, pe.Status, pe.Timeout(), tc.status, tc.timeout)
			}
			if up := srv.Stats().UpgradesAccepted; up != 0 {
				t.Errorf("simulator upgrades %d, want 0 (nothing direct)", up)
			}
		})
	}
}

// TestProxyFailureOnHTTPFallbackIsTyped: on the HTTP fallback (the origin answers 426), a proxy
// that dies fails the next request with an error egress.AsError finds, as on the upgrade path.
func TestProxyFailureOnHTTPFallbackIsTyped(t *testing.T) {
	srv := newSim(t, codextest.Options{WSOff: true})
	px := proxytest.NewConnect(t, "acct1", "s3cretpw")
	c := newClient(t, srv, Config{NoReuse: true, ProxyURL: px.URLWith("acct1", "s3cretpw")})
	if _, err := c.Generate(context.Background(), createFrame("hi", nil), nil); err != nil {
		t.Fatalf("Generate over the HTTP fallback: %v", err)
	}
	if st := srv.Stats(); st.SSEResponses != 1 || st.UpgradesAccepted != 0 {
		t.Fatalf("simulator: HTTP streams %d, upgrades %d; want 1, 0", st.SSEResponses, st.UpgradesAccepted)
	}
	px.Kill()
	_, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
	if _, ok := egress.AsError(err); !ok || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("Generate through the dead proxy: err %v; want an egress.Error without the password", err)
	}
	if n := srv.Stats().SSEResponses; n != 1 {
		t.Errorf("simulator HTTP streams %d, want still 1", n)
	}
}
