package codextest

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HTTP streaming, the transport a client falls back to on a 426: a POST of the response.create
// body (without "type") answered with server-sent events, "event: <type>" / "data: <the event
// JSON the WebSocket would carry>", from the same steps a socket executes.

// A stream is an HTTP stream in flight; CloseClientConnections closes drop.
type stream struct {
	drop chan struct{}
}

// serveStream answers a POST to the origin. Refusals come as HTTP statuses with the JSON error
// body, in the order an upgrade meets them: RejectNext, the token, then the body, then usage.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, 0, "server_closed", "The server is shutting down.")
		return
	}
	s.wg.Add(1)
	defer s.wg.Done()
	epoch := s.drops
	rej := s.popRejectLocked()
	s.mu.Unlock()

	if rej.status != 0 {
		s.refuseHTTP(w, rej.status, rej.retryAfter, "", "")
		return
	}
	now := time.Now()
	acct, fail := s.authenticate(r, now)
	if fail != nil {
		s.refuseHTTP(w, http.StatusUnauthorized, 0, fail.code, fail.msg)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFrame))
	if err != nil {
		s.refuseHTTP(w, http.StatusBadRequest, 0, "invalid_request", "The body could not be read.")
		return
	}
	s.mu.Lock()
	s.lastHTTP, s.lastHTTPBody = r.Header.Clone(), body
	s.mu.Unlock()
	var req struct {
		genRequest
		Stream *bool `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.refuseHTTP(w, http.StatusBadRequest, 0, "invalid_request", "The body is not a JSON object: "+err.Error())
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") && (req.Stream == nil || !*req.Stream) {
		s.refuseHTTP(w, http.StatusBadRequest, 0, "invalid_request", `Only streaming is simulated: send "stream": true or Accept: text/event-stream.`)
		return
	}
	if acct != nil {
		setUsageHeaders(w.Header(), acct.use(now), now)
	}
	steps, refusal := s.begin(acct, &req.genRequest, true, now)
	if refusal != nil {
		var ra time.Duration
		if refusal.Status == http.StatusTooManyRequests {
			ra = time.Duration(refusal.Error.ResetsInSeconds) * time.Second
		}
		s.c.httpRejected.Add(1)
		writeErrorBody(w, refusal.Status, ra, refusal.Error)
		return
	}

	st := &stream{drop: make(chan struct{})}
	s.mu.Lock()
	if s.closed || s.drops != epoch {
		s.mu.Unlock()
		dropHTTP(w)
		return
	}
	s.streams[st] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.streams, st)
		s.mu.Unlock()
	}()
	s.runStream(w, r, st, acct, steps, epoch)
}

// runStream writes steps as server-sent events on their schedule.
func (s *Server) runStream(w http.ResponseWriter, r *http.Request, st *stream, acct *account, steps []step, epoch uint64) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	start := time.Now()
	ctx := r.Context()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	seq := 0
	write := func(name string, data []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		var err error
		if name != "" {
			_, err = io.WriteString(w, "event: "+name+"\n")
		}
		if err == nil {
			_, err = io.WriteString(w, "data: "+string(data)+"\n\n")
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			s.abort(epoch) // the client stopped reading before the terminal event
			return false
		}
		return true
	}
	_ = rc.Flush() // the 200 goes out at once, even before a late first event
	for i := range steps {
		stp := &steps[i]
		var due <-chan time.Time
		wait := stp.op == opStall
		if d := stp.at - time.Since(start); d > 0 && !wait {
			timer.Reset(d)
			due, wait = timer.C, true
		}
		if wait {
			select {
			case <-due:
			case <-ctx.Done():
				s.abort(epoch)
				return
			case <-st.drop:
				dropHTTP(w)
				return
			case <-s.done:
				dropHTTP(w) // a server going away cuts its streams; it does not end them cleanly
				return
			}
		}
		switch stp.op {
		case opText:
			stp.ev.setSeq(seq)
			seq++
			b, err := json.Marshal(stp.ev)
			if err != nil {
				return
			}
			if re, ok := stp.ev.(*responseEvent); ok && re.Type == evCompleted {
				s.completed(acct)
			}
			if !write(stp.ev.eventType(), b) {
				return
			}
		case opInfo:
			if !write(stp.name, stp.raw) {
				return
			}
		case opRaw:
			if !write("", stp.raw) {
				return
			}
		default: // opDrop, and the WebSocket-only opBinary, opClose1008, opCloseConn
			dropHTTP(w)
			return
		}
	}
}

// dropHTTP closes the request's TCP connection without finishing the response.
func dropHTTP(w http.ResponseWriter) {
	nc, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // makes net/http close the connection
	}
	nc.Close()
}

// refuseHTTP answers an HTTP streaming request with status and the JSON error body, and counts it.
func (s *Server) refuseHTTP(w http.ResponseWriter, status int, retryAfter time.Duration, code, msg string) {
	s.c.httpRejected.Add(1)
	if status == http.StatusUnauthorized {
		s.c.unauthorized.Add(1)
	}
	s.logf("codextest: HTTP request refused with %d", status)
	if code == "" {
		code, msg = rejectText(status)
	}
	writeError(w, status, retryAfter, code, msg)
}

// writeErrorBody writes {"error": body} with status.
func writeErrorBody(w http.ResponseWriter, status int, retryAfter time.Duration, body errorBody) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(retryAfter/time.Second), 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error errorBody `json:"error"`
	}{body})
}

// LastHTTPRequest returns copies of the headers and body of the latest HTTP streaming request
// that got past the token check (nil before the first), so tests can check what a client sends
// on the fallback.
func (s *Server) LastHTTPRequest() (http.Header, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastHTTP.Clone(), append([]byte(nil), s.lastHTTPBody...)
}
