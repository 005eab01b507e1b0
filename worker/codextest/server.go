package codextest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// OriginPath is the path of URL. Any path outside ControlURL is served as the origin, so
// /v1/responses works as well.
const OriginPath = "/backend-api/codex/responses"

// writeTimeout bounds one frame write, so a client that stops reading cannot pin a goroutine.
const writeTimeout = 10 * time.Second

// maxFrame is the largest client frame read.
const maxFrame = 16 << 20

// A Server is a Codex origin listening on a loopback (or given) address, serving WebSocket
// upgrades and HTTP streaming (POST, server-sent events) on every path except those under /_sim,
// which are its HTTP control endpoints, and RefreshPath, its OAuth token endpoint.
//
// The Server itself is a shell, as httptest.Server is: its URLs, Close, CloseClientConnections
// and the counters. What it does to clients is set through its fields: Faults (what the next
// requests suffer), Limits (what it lets through), Accounts (whom it serves) and Logins (the
// credentials it issues). All methods are safe for concurrent use.
type Server struct {
	// URL is the origin's WebSocket URL, "ws://127.0.0.1:PORT/backend-api/codex/responses".
	URL string
	// HTTPURL is the same origin for HTTP streaming, "http://127.0.0.1:PORT/backend-api/codex/responses".
	HTTPURL string
	// RefreshURL is the OAuth token endpoint, "http://127.0.0.1:PORT/oauth/token".
	RefreshURL string
	// ControlURL is the base of the HTTP control endpoints, "http://127.0.0.1:PORT/_sim".
	ControlURL string
	// Listener is the server's listener; Close closes it.
	Listener net.Listener

	// Faults queues rejections and faults for the next upgrades, responses and refreshes.
	Faults *Faults
	// Limits are the upgrade token buckets and the WebSocket switch, from Options at start.
	Limits *Limits
	// Accounts are the accounts served (Options.Accounts): their usage and counters.
	Accounts *Accounts
	// Logins issues logins for Accounts and rotates their refresh tokens at RefreshURL.
	Logins *Logins

	opts     Options
	upgrader websocket.Upgrader
	srv      *http.Server
	control  *http.ServeMux // the endpoints under ControlURL
	conns    *connTable
	c        counters
	aborts   abortLog
	last     lastRequests
	caches   promptCaches
	turns    turnLog       // the response.create frames received, for Turns
	searches searchLog     // the web search tools declared, for WebSearchTools
	ids      atomic.Uint64 // response ids
	done     chan struct{} // closed by Close
}

// NewServer starts a Server on 127.0.0.1:0 and returns it serving. It panics if it cannot listen,
// as httptest.NewServer does.
func NewServer(opts Options) *Server {
	s, err := Listen("127.0.0.1:0", opts)
	if err != nil {
		panic(err)
	}
	return s
}

// Listen starts a Server on addr (host:port; "" = "127.0.0.1:0"), for `codexpool sim --addr`.
// When addr's host is unspecified, URL and ControlURL name 127.0.0.1. It fails on invalid
// Options.Accounts or Options.ToolCalls, naming the field.
func Listen(addr string, opts Options) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if err := validateAccounts(opts.Accounts); err != nil {
		return nil, fmt.Errorf("codextest: %w", err)
	}
	if err := validateToolCalls(opts.ToolCalls); err != nil {
		return nil, fmt.Errorf("codextest: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("codextest: listen: %w", err)
	}
	accts := newAccounts(opts.Accounts)
	s := &Server{
		Listener: ln,
		Faults:   &Faults{},
		Limits:   newLimits(opts, accts),
		Accounts: accts,
		Logins:   newLogins(accts, opts.tokenLifetime()),
		opts:     opts,
		upgrader: websocket.Upgrader{
			HandshakeTimeout: 15 * time.Second,
			CheckOrigin:      func(*http.Request) bool { return true },
		},
		conns: newConnTable(),
		done:  make(chan struct{}),
	}
	s.control = s.controlMux()
	host := hostPort(ln.Addr())
	s.URL = "ws://" + host + OriginPath
	s.HTTPURL = "http://" + host + OriginPath
	s.RefreshURL = "http://" + host + RefreshPath
	s.ControlURL = "http://" + host + controlPrefix
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 15 * time.Second,
		ConnState:         s.conns.connState,
	}
	s.conns.wg.Add(1)
	go func() {
		defer s.conns.wg.Done()
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
}

func hostPort(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := ta.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port))
}

// Close closes the listener and every connection, and waits for all of the server's goroutines.
func (s *Server) Close() {
	if !s.conns.shut() {
		return
	}
	close(s.done)
	s.srv.Close()
	s.CloseClientConnections()
	s.conns.wg.Wait()
}

// CloseClientConnections drops every open socket, every hung upgrade and every HTTP stream in
// flight: a TCP close, no Close frame. The server keeps listening.
func (s *Server) CloseClientConnections() { s.conns.closeClients() }

// WaitIdle waits until no upgraded socket is open, or ctx ends (returning ctx.Err()).
// Tests use it after closing their clients to prove nothing leaked.
func (s *Server) WaitIdle(ctx context.Context) error { return s.WaitOpenSockets(ctx, 0) }

// WaitOpenSockets waits until at most n upgraded sockets are open, or ctx ends (returning
// ctx.Err()).
func (s *Server) WaitOpenSockets(ctx context.Context, n int64) error {
	return s.conns.waitOpen(ctx, n)
}

// WaitAborts waits until Stats.ClientAborts is at least n, or ctx ends (returning ctx.Err()).
// With Stats.LastAbort it tells a test how soon the origin saw a client give up.
func (s *Server) WaitAborts(ctx context.Context, n int64) error { return s.aborts.wait(ctx, n) }

// abort counts a client abort, unless the server itself ended the exchange: Close, or
// CloseClientConnections since the exchange began at epoch.
func (s *Server) abort(epoch uint64) {
	if !s.conns.ended(epoch) {
		s.aborts.record(time.Now())
	}
}

// LastUpgradeHeader returns a copy of the headers of the latest upgrade request (nil before the
// first), so tests can check what a client sends.
func (s *Server) LastUpgradeHeader() http.Header {
	s.last.mu.Lock()
	defer s.last.mu.Unlock()
	return s.last.upgrade.Clone()
}

// LastHTTPRequest returns copies of the headers and body of the latest HTTP streaming request
// that got past the token check (nil before the first), so tests can check what a client sends
// on the fallback.
func (s *Server) LastHTTPRequest() (http.Header, []byte) {
	s.last.mu.Lock()
	defer s.last.mu.Unlock()
	return s.last.httpHeader.Clone(), append([]byte(nil), s.last.httpBody...)
}

// lastRequests are the latest requests seen, for LastUpgradeHeader and LastHTTPRequest.
type lastRequests struct {
	mu         sync.Mutex
	upgrade    http.Header
	httpHeader http.Header
	httpBody   []byte
}

func (l *lastRequests) recordUpgrade(h http.Header) {
	l.mu.Lock()
	l.upgrade = h.Clone()
	l.mu.Unlock()
}

func (l *lastRequests) recordHTTP(h http.Header, body []byte) {
	l.mu.Lock()
	l.httpHeader, l.httpBody = h.Clone(), body
	l.mu.Unlock()
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == controlPrefix || strings.HasPrefix(r.URL.Path, controlPrefix+"/"):
		s.control.ServeHTTP(w, r)
	case r.URL.Path == RefreshPath:
		s.serveRefresh(w, r)
	default:
		s.serveOrigin(w, r)
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}
