package codextest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"
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
// All methods are safe for concurrent use.
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

	opts     Options
	upgrader websocket.Upgrader
	srv      *http.Server
	c        counters
	ids      atomic.Uint64
	wg       sync.WaitGroup // Serve, live HTTP connections, origin handlers and their sessions
	done     chan struct{}  // closed by Close

	// Fixed after Listen.
	jwtKey   []byte              // signs issued tokens
	accounts map[string]*account // by name; nil without Options.Accounts
	acctList []*account          // in Options.Accounts order
	byToken  map[string]*account // static tokens

	mu         sync.Mutex
	closed     bool
	wsOff      bool
	limiter    *rate.Limiter // nil = unlimited
	retryAfter time.Duration // with rate-limit 403s
	rejects    []rejectRule
	faults     []faultRule
	upFaults   []faultRule
	lastHeader http.Header
	httpConns  map[net.Conn]struct{} // accepted, not yet hijacked or closed
	conns      map[net.Conn]struct{} // hijacked: upgraded sockets and hung upgrades
	open       int64                 // sockets upgraded or being upgraded, not yet closed
	drops      uint64                // CloseClientConnections calls, to catch sockets mid-upgrade
	peak       int64
	closedConn chan struct{} // closed (and replaced) whenever a socket is unregistered

	refreshTokens map[string]*refreshEntry // every refresh token issued
	refreshFaults []refreshRule
	streams       map[*stream]struct{} // HTTP streams in flight
	abortCh       chan struct{}        // closed (and replaced) on every client abort
	lastAbort     time.Time
	lastHTTP      http.Header // of the latest HTTP streaming request
	lastHTTPBody  []byte
}

type rejectRule struct {
	n          int
	status     int
	retryAfter time.Duration
}

type faultRule struct {
	n int
	f Fault
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
// Options.Accounts, naming the field.
func Listen(addr string, opts Options) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if err := validateAccounts(opts.Accounts); err != nil {
		return nil, fmt.Errorf("codextest: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("codextest: listen: %w", err)
	}
	s := &Server{
		Listener:   ln,
		opts:       opts,
		httpConns:  make(map[net.Conn]struct{}),
		conns:      make(map[net.Conn]struct{}),
		closedConn: make(chan struct{}),
		upgrader: websocket.Upgrader{
			HandshakeTimeout: 15 * time.Second,
			CheckOrigin:      func(*http.Request) bool { return true },
		},
		retryAfter:    opts.RetryAfter,
		done:          make(chan struct{}),
		wsOff:         opts.WSOff,
		jwtKey:        make([]byte, 32),
		refreshTokens: make(map[string]*refreshEntry),
		streams:       make(map[*stream]struct{}),
		abortCh:       make(chan struct{}),
	}
	rand.Read(s.jwtKey)
	if len(opts.Accounts) > 0 {
		s.accounts = make(map[string]*account, len(opts.Accounts))
		s.byToken = make(map[string]*account)
		for _, a := range opts.Accounts {
			acct := newAccount(a)
			s.accounts[a.Name] = acct
			s.acctList = append(s.acctList, acct)
			if a.Token != "" {
				s.byToken[a.Token] = acct
			}
		}
	}
	s.SetUpgradeLimit(opts.UpgradeRate, opts.UpgradeBurst)
	host := hostPort(ln.Addr())
	s.URL = "ws://" + host + OriginPath
	s.HTTPURL = "http://" + host + OriginPath
	s.RefreshURL = "http://" + host + RefreshPath
	s.ControlURL = "http://" + host + controlPrefix
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 15 * time.Second,
		ConnState:         s.connState,
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
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

// connState accounts for the HTTP server's connection goroutines so Close can wait for them,
// as httptest does.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		if s.closed {
			c.Close()
			return
		}
		s.httpConns[c] = struct{}{}
		s.wg.Add(1)
	case http.StateHijacked, http.StateClosed:
		if _, ok := s.httpConns[c]; ok {
			delete(s.httpConns, c)
			s.wg.Done()
		}
	}
}

// Close closes the listener and every connection, and waits for all of the server's goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.srv.Close()
	s.CloseClientConnections()
	s.wg.Wait()
}

// CloseClientConnections drops every open socket, every hung upgrade and every HTTP stream in
// flight: a TCP close, no Close frame. The server keeps listening.
func (s *Server) CloseClientConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drops++ // sockets between their 101 and register see this and close themselves
	for c := range s.conns {
		c.Close()
	}
	for st := range s.streams {
		close(st.drop)
		delete(s.streams, st)
	}
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	open, peak, lastAbort := s.open, s.peak, s.lastAbort
	s.mu.Unlock()
	st := Stats{
		UpgradesAccepted:   s.c.upgradesAccepted.Load(),
		UpgradesRejected:   s.c.upgradesRejected.Load(),
		Rejected403:        s.c.rejected403.Load(),
		Upgrades426:        s.c.upgrades426.Load(),
		Responses:          s.c.responses.Load(),
		SSEResponses:       s.c.sse.Load(),
		Completed:          s.c.completed.Load(),
		ReusedResponses:    s.c.reused.Load(),
		BusyRejected:       s.c.busy.Load(),
		Faults:             s.c.faults.Load(),
		OpenSockets:        open,
		PeakOpenSockets:    peak,
		HTTPRejected:       s.c.httpRejected.Load(),
		Unauthorized:       s.c.unauthorized.Load(),
		UsageLimited:       s.c.usageLimited.Load(),
		ClientAborts:       s.c.clientAborts.Load(),
		LastAbort:          lastAbort,
		RefreshCalls:       s.c.refreshCalls.Load(),
		RefreshOK:          s.c.refreshOK.Load(),
		RefreshReused:      s.c.refreshReused.Load(),
		RefreshInvalidated: s.c.refreshInvalidated.Load(),
	}
	if len(s.acctList) > 0 {
		now := time.Now()
		st.Accounts = make(map[string]AccountStats, len(s.acctList))
		for _, a := range s.acctList {
			st.Accounts[a.Name] = a.stats(now)
		}
	}
	return st
}

// ResetStats zeroes the counters, the accounts' too, and LastAbort; PeakOpenSockets restarts
// from the sockets open now. Usage windows keep their counts (see SetUsage).
func (s *Server) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.reset()
	for _, a := range s.acctList {
		a.c.reset()
	}
	s.peak = s.open
	s.lastAbort = time.Time{}
}

// Reset zeroes the counters (as ResetStats) and forgets every pending RejectNext, FaultNext,
// InjectUpgradeFault and RefreshFaultNext. Limits, usage, logins and options stay.
func (s *Server) Reset() {
	s.mu.Lock()
	s.rejects, s.faults, s.upFaults, s.refreshFaults = nil, nil, nil, nil
	s.mu.Unlock()
	s.ResetStats()
}

// SetUpgradeLimit replaces the upgrade token bucket with a full one of burst tokens refilled at
// r per second. r <= 0 removes the limit; burst <= 0 means max(1, ceil(r)).
func (s *Server) SetUpgradeLimit(r float64, burst int) {
	var lim *rate.Limiter
	if r > 0 && !math.IsInf(r, 1) {
		lim = rate.NewLimiter(rate.Limit(r), defaultBurst(r, burst))
	}
	s.mu.Lock()
	s.limiter = lim
	s.mu.Unlock()
}

// SetRetryAfter changes the Retry-After sent with rate-limit 403s (0 = none).
func (s *Server) SetRetryAfter(d time.Duration) {
	s.mu.Lock()
	s.retryAfter = d
	s.mu.Unlock()
}

// RejectNext makes the next n upgrades or HTTP streaming requests fail with HTTP status (e.g.
// 401, 403, 426, 429, 500) and a JSON body {"error":{"message":...,"type":...,"code":...}}, with
// Retry-After (whole seconds, rounded up) when retryAfter > 0. Calls queue up: rules apply in the
// order they were given. RejectNext is checked before the token check, MaxConns and the rate
// limit, and consumes no rate-limit token; with WSOff, upgrades get 426 and consume no rule.
func (s *Server) RejectNext(n int, status int, retryAfter time.Duration) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.rejects = append(s.rejects, rejectRule{n: n, status: status, retryAfter: retryAfter})
	s.mu.Unlock()
}

// FaultNext applies f to the next n responses started on any socket (a request's metadata
// "sim_fault" takes precedence and does not consume one). Upgrade-level faults
// (FaultHangUpgrade) are forwarded to InjectUpgradeFault. Calls queue up in order.
func (s *Server) FaultNext(n int, f Fault) {
	if f == FaultHangUpgrade {
		s.InjectUpgradeFault(n, f)
		return
	}
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.faults = append(s.faults, faultRule{n: n, f: f})
	s.mu.Unlock()
}

// InjectUpgradeFault applies an upgrade-level fault to the next n upgrades:
// FaultHangUpgrade (never answer), FaultDrop (TCP close before answering), FaultClose1008 (101,
// then Close 1008 at once), FaultConnLimit (101, then the websocket_connection_limit_reached
// event and a close). Other faults are ignored. Upgrade faults come before RejectNext.
func (s *Server) InjectUpgradeFault(n int, f Fault) {
	if n <= 0 || !f.Upgrade() {
		return
	}
	s.mu.Lock()
	s.upFaults = append(s.upFaults, faultRule{n: n, f: f})
	s.mu.Unlock()
}

// WaitIdle waits until no upgraded socket is open, or ctx ends (returning ctx.Err()).
// Tests use it after closing their clients to prove nothing leaked.
func (s *Server) WaitIdle(ctx context.Context) error { return s.WaitOpenSockets(ctx, 0) }

// WaitOpenSockets waits until at most n upgraded sockets are open, or ctx ends (returning
// ctx.Err()).
func (s *Server) WaitOpenSockets(ctx context.Context, n int64) error {
	for {
		s.mu.Lock()
		if s.open <= n {
			s.mu.Unlock()
			return nil
		}
		ch := s.closedConn
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// LastUpgradeHeader returns a copy of the headers of the latest upgrade request (nil before the
// first), so tests can check what a client sends.
func (s *Server) LastUpgradeHeader() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastHeader.Clone()
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

func popFault(q *[]faultRule) Fault {
	if len(*q) == 0 {
		return FaultNone
	}
	r := &(*q)[0]
	f := r.f
	if r.n--; r.n <= 0 {
		*q = (*q)[1:]
	}
	return f
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == controlPrefix || strings.HasPrefix(r.URL.Path, controlPrefix+"/"):
		s.serveControl(w, r)
	case r.URL.Path == RefreshPath:
		s.serveRefresh(w, r)
	default:
		s.serveOrigin(w, r)
	}
}

// SetWSOff switches WebSockets off (every upgrade answered 426 upgrade_required) or back on, at
// run time; HTTP streaming is unaffected. Options.WSOff is the initial setting.
func (s *Server) SetWSOff(off bool) {
	s.mu.Lock()
	s.wsOff = off
	s.mu.Unlock()
}

func (s *Server) serveOrigin(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		if r.Method == http.MethodPost {
			s.serveStream(w, r)
			return
		}
		writeError(w, http.StatusUpgradeRequired, 0, "upgrade_required", "This endpoint only accepts WebSocket upgrades.")
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, 0, "server_closed", "The server is shutting down.")
		return
	}
	s.wg.Add(1) // the HTTP connection's own count is held, so this never races Close's Wait
	defer s.wg.Done()
	s.lastHeader = r.Header.Clone()
	if s.wsOff {
		s.mu.Unlock()
		s.reject(w, http.StatusUpgradeRequired, 0, "", "")
		return
	}
	epoch := s.drops
	uf := popFault(&s.upFaults)
	var rej rejectRule
	if uf == FaultNone {
		rej = s.popRejectLocked()
	}
	s.mu.Unlock()

	switch {
	case uf == FaultHangUpgrade || uf == FaultDrop:
		s.c.faults.Add(1)
		s.c.upgradesRejected.Add(1)
		s.logf("codextest: upgrade fault %s", uf)
		s.hijackAndHold(w, uf == FaultHangUpgrade, epoch)
		return
	case rej.status != 0:
		s.reject(w, rej.status, rej.retryAfter, "", "")
		return
	}
	now := time.Now()
	acct, fail := s.authenticate(r, now)
	if fail != nil {
		s.reject(w, http.StatusUnauthorized, 0, fail.code, fail.msg)
		return
	}
	var usage []WindowStats
	if acct != nil {
		usage = acct.use(now)
	}

	s.mu.Lock()
	if s.opts.MaxConns > 0 && s.open >= int64(s.opts.MaxConns) {
		s.mu.Unlock()
		s.rejectFor(acct, w, http.StatusServiceUnavailable, 0, "too_many_connections", "Too many open connections.")
		return
	}
	if !s.allowUpgradeLocked(acct, now) {
		ra := s.retryAfter
		s.mu.Unlock()
		s.rejectFor(acct, w, http.StatusForbidden, ra, "websocket_upgrade_rate_limited", "Too many WebSocket connection attempts; slow down.")
		return
	}
	// The socket counts as open (and accepted) before the 101 goes out, so a client that has
	// seen its upgrade succeed always finds it in Stats.
	s.open++
	s.peak = max(s.peak, s.open)
	s.mu.Unlock()
	s.c.upgradesAccepted.Add(1)
	var hdr http.Header
	if acct != nil {
		acct.c.accepted.Add(1)
		if len(usage) > 0 {
			hdr = make(http.Header)
			setUsageHeaders(hdr, usage, now)
		}
	}

	ws, err := s.upgrader.Upgrade(w, r, hdr)
	if err != nil {
		s.c.upgradesAccepted.Add(-1)
		s.c.upgradesRejected.Add(1) // the upgrader has answered with an HTTP error
		if acct != nil {
			acct.c.accepted.Add(-1)
			acct.c.rejected.Add(1)
		}
		s.unregister(nil)
		s.logf("codextest: upgrade failed: %v", err)
		return
	}
	ws.SetReadLimit(maxFrame)
	nc := ws.NetConn()
	if !s.register(nc, epoch) {
		nc.Close()
		s.unregister(nil)
		return
	}
	defer s.unregister(nc)
	defer nc.Close()

	switch uf {
	case FaultClose1008:
		s.c.faults.Add(1)
		writeClose(ws, websocket.ClosePolicyViolation, "policy violation (simulated)")
		return
	case FaultConnLimit:
		s.c.faults.Add(1)
		sc := &session{s: s, ws: ws}
		if sc.write(nil, connLimitEvent()) == nil {
			writeClose(ws, websocket.CloseNormalClosure, codeConnLimit)
		}
		return
	}
	newSession(s, ws, acct, epoch).serve()
}

// allowUpgradeLocked takes a token from acct's bucket and from the global one, or from neither.
// s.mu is held.
func (s *Server) allowUpgradeLocked(acct *account, now time.Time) bool {
	var res *rate.Reservation
	if acct != nil && acct.lim != nil {
		res = acct.lim.ReserveN(now, 1)
		if !res.OK() || res.DelayFrom(now) > 0 {
			res.CancelAt(now)
			return false
		}
	}
	if s.limiter != nil && !s.limiter.AllowN(now, 1) {
		if res != nil {
			res.CancelAt(now)
		}
		return false
	}
	return true
}

// popRejectLocked takes the next RejectNext rule (status 0 = none). s.mu is held.
func (s *Server) popRejectLocked() rejectRule {
	if len(s.rejects) == 0 {
		return rejectRule{}
	}
	q := &s.rejects[0]
	rej := *q
	if q.n--; q.n <= 0 {
		s.rejects = s.rejects[1:]
	}
	return rej
}

// register records an upgraded socket (already counted open) so it can be dropped; false if the
// server closed, or CloseClientConnections ran, since the upgrade began at epoch.
func (s *Server) register(nc net.Conn, epoch uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.drops != epoch {
		return false
	}
	s.conns[nc] = struct{}{}
	return true
}

// unregister forgets a socket (nc nil: one that never registered) and counts it closed.
func (s *Server) unregister(nc net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if nc != nil {
		delete(s.conns, nc)
	}
	s.open--
	close(s.closedConn)
	s.closedConn = make(chan struct{})
}

// hijackAndHold takes the TCP connection without answering. hold keeps it (reading and
// discarding) until the peer or the server closes it; otherwise it is closed at once.
func (s *Server) hijackAndHold(w http.ResponseWriter, hold bool, epoch uint64) {
	nc, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.logf("codextest: hijack: %v", err)
		return
	}
	if !hold {
		nc.Close()
		return
	}
	if !s.register(nc, epoch) {
		nc.Close()
		return
	}
	_, _ = io.Copy(io.Discard, nc)
	nc.Close()
	s.mu.Lock()
	delete(s.conns, nc)
	s.mu.Unlock()
}

// reject answers an upgrade with status and a JSON error body, and counts it.
func (s *Server) reject(w http.ResponseWriter, status int, retryAfter time.Duration, code, msg string) {
	s.rejectFor(nil, w, status, retryAfter, code, msg)
}

// rejectFor is reject for an upgrade authenticated as acct (nil = none), counted against it too.
func (s *Server) rejectFor(acct *account, w http.ResponseWriter, status int, retryAfter time.Duration, code, msg string) {
	s.c.upgradesRejected.Add(1)
	switch status {
	case http.StatusForbidden:
		s.c.rejected403.Add(1)
	case http.StatusUpgradeRequired:
		s.c.upgrades426.Add(1)
	case http.StatusUnauthorized:
		s.c.unauthorized.Add(1)
	}
	if acct != nil {
		acct.c.rejected.Add(1)
		if status == http.StatusForbidden {
			acct.c.rejected403.Add(1)
		}
	}
	s.logf("codextest: upgrade rejected with %d", status)
	if code == "" {
		code, msg = rejectText(status)
	}
	writeError(w, status, retryAfter, code, msg)
}

func rejectText(status int) (code, msg string) {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_api_key", "Your authentication token is invalid or expired (simulated)."
	case status == http.StatusForbidden:
		return "forbidden", "Forbidden (simulated)."
	case status == http.StatusUpgradeRequired:
		return "upgrade_required", "WebSockets are not available for this account (simulated)."
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded", "Rate limit reached (simulated)."
	case status >= 500:
		return "server_error", "The server had an error (simulated)."
	}
	return "error", http.StatusText(status) + " (simulated)."
}

// errorType is the "type" of the OpenAI error body for status.
func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	}
	return "invalid_request_error"
}

func writeError(w http.ResponseWriter, status int, retryAfter time.Duration, code, msg string) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(retryAfter.Seconds())), 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	body.Error.Message, body.Error.Type, body.Error.Code = msg, errorType(status), code
	_ = json.NewEncoder(w).Encode(&body)
}

func writeClose(ws *websocket.Conn, code int, text string) {
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(writeTimeout))
}

// abort counts a client abort, unless the server itself ended the exchange: Close, or
// CloseClientConnections since the exchange began at epoch.
func (s *Server) abort(epoch uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.drops != epoch {
		return
	}
	s.c.clientAborts.Add(1)
	s.lastAbort = time.Now()
	close(s.abortCh)
	s.abortCh = make(chan struct{})
}

// WaitAborts waits until Stats.ClientAborts is at least n, or ctx ends (returning ctx.Err()).
// With Stats.LastAbort it tells a test how soon the origin saw a client give up.
func (s *Server) WaitAborts(ctx context.Context, n int64) error {
	for {
		s.mu.Lock()
		if s.c.clientAborts.Load() >= n {
			s.mu.Unlock()
			return nil
		}
		ch := s.abortCh
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
