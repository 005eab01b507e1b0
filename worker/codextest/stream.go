package codextest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
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
// body, in the order an upgrade meets them: a rejection, the token, then the body, then usage.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	epoch, ok := s.conns.enter()
	if !ok {
		writeError(w, http.StatusServiceUnavailable, 0, "server_closed", "The server is shutting down.")
		return
	}
	defer s.conns.leave()
	if rej := s.Faults.nextReject(); rej.status != 0 {
		s.refuse(w, onStream, nil, rej)
		return
	}
	now := time.Now()
	acct, fail := s.authenticate(r, now)
	if fail != nil {
		s.refuse(w, onStream, nil, refusal{status: http.StatusUnauthorized, code: fail.code, msg: fail.msg})
		return
	}
	req, rf := s.readStreamRequest(w, r)
	if rf.status != 0 {
		s.refuse(w, onStream, nil, rf)
		return
	}
	if acct != nil {
		setUsageHeaders(w.Header(), acct.use(now), now)
	}
	steps, refused := s.begin(acct, req, true, now)
	if refused != nil {
		var ra time.Duration
		if refused.Status == http.StatusTooManyRequests {
			ra = time.Duration(refused.Error.ResetsInSeconds) * time.Second
		}
		s.c.httpRejected.Add(1)
		writeErrorBody(w, refused.Status, ra, refused.Error)
		return
	}
	st := &stream{drop: make(chan struct{})}
	if !s.conns.addStream(st, epoch) {
		dropHTTP(w)
		return
	}
	defer s.conns.removeStream(st)
	conc := inflightOf(acct)
	conc.enter()
	defer conc.leave()
	s.runStream(w, r, st, acct, steps, epoch)
}

// readStreamRequest reads and records the body of a streaming request, or says how to refuse it.
func (s *Server) readStreamRequest(w http.ResponseWriter, r *http.Request) (*genRequest, refusal) {
	bad := func(msg string) refusal {
		return refusal{status: http.StatusBadRequest, code: "invalid_request", msg: msg}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFrame))
	if err != nil {
		return nil, bad("The body could not be read.")
	}
	s.last.recordHTTP(r.Header, body)
	if ev := s.strictRefusal(body); ev != nil {
		return nil, refusal{status: http.StatusBadRequest, code: ev.Error.Code, msg: ev.Error.Message}
	}
	var req struct {
		genRequest
		Stream *bool `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, bad("The body is not a JSON object: " + err.Error())
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") && (req.Stream == nil || !*req.Stream) {
		return nil, bad(`Only streaming is simulated: send "stream": true or Accept: text/event-stream.`)
	}
	if id := req.PreviousResponseID; id != "" {
		s.c.previousNotFound.Add(1) // HTTP streaming keeps no connection-local state
		ev := previousNotFoundEvent(id)
		return nil, refusal{status: http.StatusBadRequest, code: ev.Error.Code, msg: ev.Error.Message}
	}
	return &req.genRequest, refusal{}
}

// runStream writes steps as server-sent events on their schedule.
func (s *Server) runStream(w http.ResponseWriter, r *http.Request, st *stream, acct *account, steps []step, epoch uint64) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	out := &sseWriter{w: w, rc: http.NewResponseController(w)}
	_ = out.rc.Flush() // the 200 goes out at once, even before a late first event
	start := time.Now()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for i := range steps {
		stp := &steps[i]
		switch s.streamWait(r.Context(), st, timer, stp, start) {
		case waitAborted:
			s.abort(epoch)
			return
		case waitDropped:
			dropHTTP(w)
			return
		}
		ok, lost := s.streamStep(out, stp, acct)
		if lost {
			s.abort(epoch) // the client stopped reading before the terminal event
		}
		if !ok {
			return
		}
	}
}

// waitResult is how a stream's wait for its next step ended.
type waitResult uint8

const (
	waitDue     waitResult = iota // the step is due
	waitAborted                   // the client went away
	waitDropped                   // CloseClientConnections or Close: cut the stream
)

// streamWait waits until stp is due (for ever, for opStall).
func (s *Server) streamWait(ctx context.Context, st *stream, timer *time.Timer, stp *step, start time.Time) waitResult {
	var due <-chan time.Time
	wait := stp.op == opStall
	if d := stp.at - time.Since(start); d > 0 && !wait {
		timer.Reset(d)
		due, wait = timer.C, true
	}
	if !wait {
		return waitDue
	}
	select {
	case <-due:
		return waitDue
	case <-ctx.Done():
		return waitAborted
	case <-st.drop:
		return waitDropped
	case <-s.done:
		return waitDropped // a server going away cuts its streams; it does not end them cleanly
	}
}

// streamStep writes one step as an event. It returns false when the stream ends, and lost when
// that is because the client stopped reading.
func (s *Server) streamStep(out *sseWriter, stp *step, acct *account) (ok, lost bool) {
	switch stp.op {
	case opText:
		stp.ev.setSeq(out.seq)
		out.seq++
		b, err := json.Marshal(stp.ev)
		if err != nil {
			return false, false
		}
		if re, isResp := stp.ev.(*responseEvent); isResp && re.Type == evCompleted {
			s.completed(acct)
		}
		return out.write(stp.ev.eventType(), b)
	case opInfo:
		return out.write(stp.name, stp.raw)
	case opRaw:
		return out.write("", stp.raw)
	}
	// opDrop, and the WebSocket-only opBinary, opClose1008, opCloseConn
	dropHTTP(out.w)
	return false, false
}

// An sseWriter writes server-sent events, numbering the response's events.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	seq int
}

// write writes one event named name ("" = unnamed); false, true when the client is gone.
func (o *sseWriter) write(name string, data []byte) (ok, lost bool) {
	_ = o.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	var err error
	if name != "" {
		_, err = io.WriteString(o.w, "event: "+name+"\n")
	}
	if err == nil {
		_, err = io.WriteString(o.w, "data: "+string(data)+"\n\n")
	}
	if err == nil {
		err = o.rc.Flush()
	}
	if err != nil {
		return false, true
	}
	return true, false
}

// dropHTTP closes the request's TCP connection without finishing the response.
func dropHTTP(w http.ResponseWriter) {
	nc, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // makes net/http close the connection
	}
	nc.Close()
}
