package codextest

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
)

// A session serves one upgraded socket with two goroutines: the origin handler's goroutine reads
// frames (so a second response.create is seen while a response runs, and pings are answered),
// and run owns every data-frame write and all timing — one timer per socket, no goroutine per
// word or per response.
type session struct {
	s          *Server
	ws         *websocket.Conn
	acct       *account      // the socket's account; nil without Options.Accounts
	epoch      uint64        // the connTable epoch at the upgrade, to tell client aborts from server drops
	frames     chan []byte   // text frames, reader -> run
	readerDone chan struct{} // closed when the reader stops
	done       chan struct{} // closed when run returns
	served     int           // responses started on this socket
	num        uint64        // the socket's number in Turns
	hist       history       // the responses made here, for previous_response_id
	lost       bool          // a write failed: the client is gone
}

// generation is the response in flight on a session.
type generation struct {
	start time.Time
	steps []step
	idx   int
	seq   int
	input json.RawMessage // the conversation the response answers, as items
}

func newSession(s *Server, ws *websocket.Conn, acct *account, epoch uint64) *session {
	return &session{
		s:          s,
		ws:         ws,
		acct:       acct,
		epoch:      epoch,
		num:        s.turns.sockets.Add(1),
		frames:     make(chan []byte),
		readerDone: make(chan struct{}),
		done:       make(chan struct{}),
	}
}

// serve runs the session until the socket closes; the caller closes the connection afterwards.
func (sc *session) serve() {
	sc.s.conns.wg.Add(1)
	go func() {
		defer sc.s.conns.wg.Done()
		sc.run()
	}()
	sc.read()
	close(sc.readerDone)
	<-sc.done
}

func (sc *session) read() {
	for {
		typ, data, err := sc.ws.ReadMessage()
		if err != nil {
			return
		}
		if typ != websocket.TextMessage {
			continue
		}
		select {
		case sc.frames <- data:
		case <-sc.done:
			return
		}
	}
}

// close drops the TCP connection, which also ends the reader.
func (sc *session) close() { sc.ws.NetConn().Close() }

func (sc *session) run() {
	defer close(sc.done)
	defer sc.close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var ageC <-chan time.Time
	if age := sc.s.opts.MaxConnAge; age > 0 {
		t := time.NewTimer(age)
		defer t.Stop()
		ageC = t.C
	}
	var g *generation
	conc := inflightOf(sc.acct)
	defer func() {
		if g != nil {
			conc.leave()
		}
	}()
	for {
		var ok bool
		prev := g
		select {
		case data := <-sc.frames:
			g, ok = sc.frame(g, data, timer)
		case <-timer.C:
			g, ok = sc.advance(g, timer)
		case <-ageC:
			sc.s.logf("codextest: socket reached its maximum age")
			if sc.write(g, connLimitEvent()) == nil {
				writeClose(sc.ws, websocket.CloseNormalClosure, codeConnLimit)
			}
			return
		case <-sc.readerDone:
			if g != nil {
				sc.s.abort(sc.epoch)
			}
			return
		}
		switch {
		case prev == nil && g != nil:
			conc.enter()
		case prev != nil && g != prev:
			conc.leave()
			if g != nil {
				conc.enter()
			}
		}
		if !ok {
			if g != nil && sc.lost {
				sc.s.abort(sc.epoch)
			}
			return
		}
	}
}

// frame handles one client text frame. It returns the generation in flight afterwards (or the
// one that was in flight when the socket must close) and false when the socket must close.
func (sc *session) frame(g *generation, data []byte, timer *time.Timer) (*generation, bool) {
	var req struct {
		Type string `json:"type"`
		genRequest
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return g, sc.write(g, badRequestEvent("The frame is not a JSON object: "+err.Error())) == nil
	}
	if req.Type != "response.create" {
		return g, true // response.processed and anything else unknown
	}
	if g != nil {
		sc.s.c.busy.Add(1)
		return g, sc.write(g, busyEvent()) == nil
	}
	sc.s.c.frameBytes.Add(int64(len(data)))
	if refusal := sc.s.strictRefusal(data); refusal != nil {
		return nil, sc.write(nil, refusal) == nil
	}
	n, miss := sc.continueFrom(&req.genRequest)
	sc.s.turns.add(Turn{Socket: sc.num, Bytes: len(data), PreviousResponseID: req.PreviousResponseID,
		Continued: miss == nil && req.PreviousResponseID != "", InputItems: n})
	if miss != nil {
		return nil, sc.write(nil, miss) == nil
	}
	now := time.Now()
	steps, refusal := sc.s.begin(sc.acct, &req.genRequest, false, now)
	if refusal != nil {
		return nil, sc.write(nil, refusal) == nil
	}
	if sc.served > 0 {
		sc.s.c.reused.Add(1)
	}
	sc.served++
	g = &generation{start: now, steps: steps, input: req.Input}
	return sc.advance(g, timer)
}

// begin starts a response for acct (nil without accounts) at now, over HTTP streaming when sse:
// an exhausted account is refused with usage_limit_reached (before any fault is drawn), bad
// metadata or input (an unknown call_id, foreign encrypted_content) with an invalid_request
// error; otherwise the response is counted and its timed steps
// returned, led by a codex.rate_limits event when the account has usage windows.
func (s *Server) begin(acct *account, req *genRequest, sse bool, now time.Time) ([]step, *errorEvent) {
	var usage []WindowStats
	if acct != nil {
		ok, resetAt, u := acct.admit(now)
		if !ok {
			s.c.usageLimited.Add(1)
			acct.c.usageLimited.Add(1)
			s.logf("codextest: account %s: usage limit reached", acct.Name)
			return nil, usageLimitEvent(acct.planType(), resetAt, now)
		}
		usage = u
	}
	t, err := readTurn(req) // before plan, so that a refused request draws no queued fault
	if err != nil {
		return nil, badRequestEvent(err.Error())
	}
	p, err := s.plan(req.overrides())
	if err != nil {
		return nil, badRequestEvent(err.Error())
	}
	s.c.responses.Add(1)
	s.c.images.Add(int64(t.images))
	s.searches.saw(req.Tools)
	s.countCompaction(t)
	if sse {
		s.c.sse.Add(1)
	}
	if acct != nil {
		acct.c.responses.Add(1)
		if sse {
			acct.c.sse.Add(1)
		}
	}
	if p.fault != FaultNone {
		s.c.faults.Add(1)
		s.logf("codextest: response fault %s", p.fault)
	}
	if !s.opts.NoPromptCache {
		t.cached = s.caches.of(acct.name()).lookup(serializedInput(req))
	}
	steps := buildSteps(p, req, t, strconv.FormatUint(s.ids.Add(1), 16), now)
	s.c.tokens.add(steps)
	if acct != nil {
		acct.c.tokens.add(steps)
	}
	if len(usage) > 0 {
		info := step{op: opInfo, name: evRateLimits, raw: rateLimitsJSON(acct.planType(), usage)}
		steps = append([]step{info}, steps...)
	}
	return steps, nil
}

// completed counts a response.completed about to be sent for acct (nil = none).
func (s *Server) completed(acct *account) {
	s.c.completed.Add(1)
	if acct != nil {
		acct.complete(time.Now())
	}
}

// plan resolves a response's settings: Options, overridden by metadata sim_latency_ms,
// sim_ttft_ms, sim_words and sim_fault; without sim_fault, the next queued response fault.
func (s *Server) plan(md map[string]string) (plan, error) {
	p := plan{latency: s.opts.Latency, ttft: s.opts.TTFT, words: s.opts.words(), calls: s.opts.ToolCalls}
	ms := func(key string, d *time.Duration) error {
		v, ok := md[key]
		if !ok {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errBadMetadata(key, v)
		}
		*d = time.Duration(n) * time.Millisecond
		return nil
	}
	if err := ms("sim_latency_ms", &p.latency); err != nil {
		return p, err
	}
	if err := ms("sim_ttft_ms", &p.ttft); err != nil {
		return p, err
	}
	if v, ok := md["sim_words"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return p, errBadMetadata("sim_words", v)
		}
		p.words = n
	}
	if v, ok := md["sim_fault"]; ok {
		f, err := ParseFault(v)
		if err != nil || f == FaultHangUpgrade {
			return p, errBadMetadata("sim_fault", v)
		}
		p.fault = f
	} else {
		p.fault = s.Faults.nextResponse()
	}
	if p.ttft > p.latency {
		p.latency = p.ttft
	}
	return p, nil
}

type metadataError struct{ key, value string }

func (e *metadataError) Error() string {
	return "codextest: bad metadata " + e.key + "=" + strconv.Quote(e.value)
}

func errBadMetadata(key, value string) error { return &metadataError{key, value} }

// advance executes every step that is due and arms the timer for the next one. It returns the
// generation still in flight (nil when finished) and false when the socket must close.
func (sc *session) advance(g *generation, timer *time.Timer) (*generation, bool) {
	if g == nil {
		return nil, true
	}
	elapsed := time.Since(g.start)
	for g.idx < len(g.steps) {
		st := &g.steps[g.idx]
		if st.at > elapsed {
			timer.Reset(st.at - elapsed)
			return g, true
		}
		if st.op == opStall {
			return g, true // busy until the socket closes
		}
		g.idx++
		if !sc.exec(g, st) {
			return g, false
		}
	}
	return nil, true
}

func (sc *session) exec(g *generation, st *step) bool {
	switch st.op {
	case opText:
		// Counted before the write: a client that has read the event finds it in Stats.
		if re, ok := st.ev.(*responseEvent); ok && re.Type == evCompleted {
			sc.s.completed(sc.acct)
			sc.rememberResponse(g, re)
		}
		return sc.write(g, st.ev) == nil
	case opRaw, opBinary, opInfo:
		typ := websocket.TextMessage
		if st.op == opBinary {
			typ = websocket.BinaryMessage
		}
		_ = sc.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := sc.ws.WriteMessage(typ, st.raw); err != nil {
			sc.lost = true
			return false
		}
		return true
	case opCloseConn:
		if sc.write(g, st.ev) == nil {
			writeClose(sc.ws, websocket.CloseNormalClosure, codeConnLimit)
		}
		return false
	case opClose1008:
		writeClose(sc.ws, websocket.ClosePolicyViolation, "policy violation (simulated)")
		return false
	}
	return false // opDrop
}

// write sends ev as one text frame, numbered in g's sequence (0 outside a response).
func (sc *session) write(g *generation, ev sequenced) error {
	seq := 0
	if g != nil {
		seq = g.seq
		g.seq++
	}
	ev.setSeq(seq)
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_ = sc.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := sc.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		sc.lost = true
		return err
	}
	return nil
}
