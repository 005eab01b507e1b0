// Package proxytest is a loopback HTTP CONNECT proxy for tests: it admits one user:password,
// answers others 407, and counts the tunnels it opened.
package proxytest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Connect is a running CONNECT proxy; it closes when the test ends.
type Connect struct {
	*httptest.Server
	Tunnels atomic.Int64 // tunnels opened for the admitted user
}

// NewConnect starts a proxy that admits user with password.
func NewConnect(t testing.TB, user, password string) *Connect {
	p := &Connect{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := &http.Request{Header: http.Header{"Authorization": {r.Header.Get("Proxy-Authorization")}}}
		u, pw, ok := auth.BasicAuth()
		if r.Method != http.MethodConnect || !ok || u != user || pw != password {
			http.Error(w, "proxy auth", http.StatusProxyAuthRequired)
			return
		}
		p.Tunnels.Add(1)
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Close()
		w.WriteHeader(http.StatusOK)
		down, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer down.Close()
		go io.Copy(up, down)
		io.Copy(down, up)
	}))
	t.Cleanup(p.Close)
	return p
}

// URLWith is the proxy's URL with user:password in it.
func (p *Connect) URLWith(user, password string) string {
	return strings.Replace(p.URL, "http://", "http://"+user+":"+password+"@", 1)
}
