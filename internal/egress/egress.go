// Package egress parses and redacts the per-account proxy URL (accounts-file field proxy_url,
// setting CODEXPOOL_PROXY_URL) and builds the dial function that sends an account's bytes
// through it: Parse first, then Dialer (or Apply on an http.Transport). A failure of the proxy
// itself is an *Error (AsError), which the worker cools the account down for.
package egress

import (
	"fmt"
	"net/http"
	"net/url"
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

// Apply routes every connection of tr through the proxy raw (already validated with Parse), with
// Dialer: tr then has no Proxy function (the tunnel is its connection). An empty or invalid raw
// leaves tr as it is.
func Apply(tr *http.Transport, raw string) {
	u, err := Parse("proxy_url", raw)
	if err != nil {
		return
	}
	tr.Proxy = nil
	tr.DialContext = Dialer(u)
}
