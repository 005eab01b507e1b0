// Package proxytest runs real proxies on loopback for tests: NewConnect, an HTTP CONNECT proxy
// in this process, and NewSOCKS5, the microsocks SOCKS5 server (a Debian package) as a child
// process. Each admits one user:password and counts the tunnels it opened for that user; Kill
// makes one dead (no new connection, every tunnel closed) before the test ends.
package proxytest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Connect is a running CONNECT proxy; it closes when the test ends.
type Connect struct {
	*httptest.Server
	Tunnels atomic.Int64 // tunnels opened for the admitted user
	// From is the local address the proxy dials out from (e.g. 127.0.0.2, so that the origin
	// can tell its tunnels from direct connections); nil = the system's choice. Set it before
	// the first tunnel.
	From net.Addr
	// Hosts maps a CONNECT target (host:port) to the address dialed instead: a name only the
	// proxy knows, so that a client reaching it at all proves it went through the proxy. Set it
	// before the first tunnel.
	Hosts map[string]string

	mu    sync.Mutex
	dead  bool
	open  map[net.Conn]struct{} // both ends of every open tunnel
	alive sync.Once
}

// NewConnect starts a proxy that admits user with password.
func NewConnect(t testing.TB, user, password string) *Connect {
	p := &Connect{open: map[net.Conn]struct{}{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := &http.Request{Header: http.Header{"Authorization": {r.Header.Get("Proxy-Authorization")}}}
		u, pw, ok := auth.BasicAuth()
		if r.Method != http.MethodConnect || !ok || u != user || pw != password {
			http.Error(w, "proxy auth", http.StatusProxyAuthRequired)
			return
		}
		p.tunnel(w, r.Host)
	}))
	t.Cleanup(p.Kill)
	return p
}

// tunnel opens the tunnel to host and copies both ways until either end closes.
func (p *Connect) tunnel(w http.ResponseWriter, host string) {
	if to, ok := p.Hosts[host]; ok {
		host = to
	}
	d := net.Dialer{LocalAddr: p.From}
	up, err := d.Dial("tcp", host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	down, brw, err := http.NewResponseController(w).Hijack()
	if err != nil || !p.track(up, down) {
		up.Close()
		if down != nil {
			down.Close()
		}
		return
	}
	p.Tunnels.Add(1)
	defer p.untrack(up, down)
	// The answer goes out after the hijack, and what the client sent after its CONNECT (read
	// ahead into brw) goes upstream first.
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		up.Close()
		down.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(up, brw.Reader)
		up.Close()
	}()
	io.Copy(down, up)
	down.Close()
	<-done
}

func (p *Connect) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return false
	}
	for _, c := range cs {
		p.open[c] = struct{}{}
	}
	return true
}

func (p *Connect) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.open, c)
	}
}

// Kill stops the proxy: its listener closes (new connections are refused) and every open
// tunnel is cut.
func (p *Connect) Kill() {
	p.alive.Do(func() {
		p.mu.Lock()
		p.dead = true
		for c := range p.open {
			c.Close()
		}
		p.mu.Unlock()
		p.Server.Close()
	})
}

// URLWith is the proxy's URL with user:password in it.
func (p *Connect) URLWith(user, password string) string {
	return strings.Replace(p.URL, "http://", "http://"+user+":"+password+"@", 1)
}
