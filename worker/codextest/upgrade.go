package codextest

import (
	"io"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

// serveOrigin answers a request to the origin: a WebSocket upgrade, met in order by the
// WebSocket switch, an upgrade fault or rejection, the token, MaxConns and the rate limits; or
// a POST, served as an HTTP stream.
func (s *Server) serveOrigin(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		if r.Method == http.MethodPost {
			s.serveStream(w, r)
			return
		}
		writeError(w, http.StatusUpgradeRequired, 0, "upgrade_required", "This endpoint only accepts WebSocket upgrades.")
		return
	}
	epoch, ok := s.conns.enter()
	if !ok {
		writeError(w, http.StatusServiceUnavailable, 0, "server_closed", "The server is shutting down.")
		return
	}
	defer s.conns.leave()
	s.last.recordUpgrade(r.Header)
	if s.Limits.webSocketsOff() {
		s.refuse(w, onUpgrade, nil, refusal{status: http.StatusUpgradeRequired})
		return
	}
	uf, rej := s.Faults.nextUpgrade()
	switch {
	case uf == FaultHangUpgrade || uf == FaultDrop:
		s.c.faults.Add(1)
		s.c.upgradesRejected.Add(1)
		s.logf("codextest: upgrade fault %s", uf)
		s.hijackAndHold(w, uf == FaultHangUpgrade, epoch)
		return
	case rej.status != 0:
		s.refuse(w, onUpgrade, nil, rej)
		return
	}
	now := time.Now()
	acct, hdr, ok := s.admitUpgrade(w, r, now)
	if ok {
		s.upgrade(w, r, acct, hdr, uf, epoch)
	}
}

// admitUpgrade authenticates an upgrade and counts its socket open, or refuses it (401, 503,
// 403). It returns the account (nil without accounts) and the headers of the 101.
func (s *Server) admitUpgrade(w http.ResponseWriter, r *http.Request, now time.Time) (*account, http.Header, bool) {
	acct, fail := s.authenticate(r, now)
	if fail != nil {
		s.refuse(w, onUpgrade, nil, refusal{status: http.StatusUnauthorized, code: fail.code, msg: fail.msg})
		return nil, nil, false
	}
	var usage []WindowStats
	if acct != nil {
		usage = acct.use(now)
	}
	var retryAfter time.Duration
	switch s.conns.openSocket(s.opts.MaxConns, func() (ok bool) {
		ok, retryAfter = s.Limits.allowUpgrade(acct, now)
		return ok
	}) {
	case openFull:
		s.refuse(w, onUpgrade, acct, refusal{status: http.StatusServiceUnavailable, code: "too_many_connections", msg: "Too many open connections."})
		return nil, nil, false
	case openLimited:
		s.refuse(w, onUpgrade, acct, refusal{status: http.StatusForbidden, retryAfter: retryAfter,
			code: "websocket_upgrade_rate_limited", msg: "Too many WebSocket connection attempts; slow down."})
		return nil, nil, false
	}
	s.c.upgradesAccepted.Add(1)
	var hdr http.Header
	if acct != nil {
		acct.c.accepted.Add(1)
		if len(usage) > 0 {
			hdr = make(http.Header)
			setUsageHeaders(hdr, usage, now)
		}
	}
	return acct, hdr, true
}

// upgrade answers an admitted upgrade with 101 and serves the socket until it closes; uf is an
// upgrade fault that strikes after the 101.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, acct *account, hdr http.Header, uf Fault, epoch uint64) {
	ws, err := s.upgrader.Upgrade(w, r, hdr)
	if err != nil {
		s.c.upgradesAccepted.Add(-1)
		s.c.upgradesRejected.Add(1) // the upgrader has answered with an HTTP error
		if acct != nil {
			acct.c.accepted.Add(-1)
			acct.c.rejected.Add(1)
		}
		s.conns.unregister(nil)
		s.logf("codextest: upgrade failed: %v", err)
		return
	}
	ws.SetReadLimit(maxFrame)
	ws.SetPingHandler(func(data string) error {
		s.c.pings.Add(1)
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeTimeout))
	})
	nc := ws.NetConn()
	if !s.conns.register(nc, epoch) {
		nc.Close()
		s.conns.unregister(nil)
		return
	}
	defer s.conns.unregister(nc)
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
	if !s.conns.register(nc, epoch) {
		nc.Close()
		return
	}
	_, _ = io.Copy(io.Discard, nc)
	nc.Close()
	s.conns.forget(nc)
}

func writeClose(ws *websocket.Conn, code int, text string) {
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(writeTimeout))
}
