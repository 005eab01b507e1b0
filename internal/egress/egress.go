// Package egress parses and redacts the per-account proxy URL (accounts-file field proxy_url,
// setting CODEXPOOL_PROXY_URL) and builds the dial functions that send an account's bytes
// through it.
package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"golang.org/x/net/proxy"
)

// Parse validates raw as a proxy URL: scheme http, https, socks5 or socks5h, a host and a port,
// optional user:password, no path. field names the setting or account in the error; the error
// never carries the password.
func Parse(field, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: not a URL: %q", field, Redact(raw))
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return nil, fmt.Errorf("%s: scheme %q: want http, https, socks5 or socks5h", field, u.Scheme)
	}
	if u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("%s: %q: want scheme://[user:password@]host:port", field, Redact(raw))
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s: %q: a proxy URL has no path, query or fragment", field, Redact(raw))
	}
	return u, nil
}

// Redact returns raw with the password of its user info replaced by "xxxxx"; a string that does
// not parse as a URL is returned as "<invalid proxy URL>", since it may hold a password anywhere.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<invalid proxy URL>"
	}
	return u.Redacted()
}

// HTTPProxy returns the Proxy function of an http.Transport or websocket.Dialer for u: CONNECT
// proxies (http, https) go through it, SOCKS ones return nil (they dial with DialContext).
func HTTPProxy(u *url.URL) func(*http.Request) (*url.URL, error) {
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil
	}
	return http.ProxyURL(u)
}

// DialContext returns the dial function for u when it is a SOCKS5 proxy (socks5: the host name
// is resolved locally; socks5h: the proxy resolves it), or nil for a CONNECT proxy.
func DialContext(u *url.URL) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	if u.Scheme != "socks5" && u.Scheme != "socks5h" {
		return nil, nil
	}
	var auth *proxy.Auth
	if u.User != nil {
		pw, _ := u.User.Password()
		auth = &proxy.Auth{User: u.User.Username(), Password: pw}
	}
	d, err := proxy.SOCKS5("tcp", u.Host, auth, &net.Dialer{})
	if err != nil {
		return nil, fmt.Errorf("socks5 proxy %s: %w", u.Redacted(), err)
	}
	cd := d.(proxy.ContextDialer)
	if u.Scheme == "socks5h" {
		return cd.DialContext, nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, err
		}
		return cd.DialContext(ctx, network, net.JoinHostPort(ips[0].IP.String(), port))
	}, nil
}

// Apply routes tr through the proxy raw (already validated with Parse); an empty or invalid raw
// leaves tr as it is.
func Apply(tr *http.Transport, raw string) {
	u, err := Parse("proxy_url", raw)
	if err != nil {
		return
	}
	tr.Proxy = HTTPProxy(u)
	if dial, err := DialContext(u); err == nil && dial != nil {
		tr.DialContext = dial
	}
}
