package codextest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestSSEMatchesWebSocket sends the same request over a socket and over HTTP streaming, for
// every response-level fault, with an account that has usage windows (so codex.rate_limits leads
// both), and checks the client sees the same events, numbering and Answer; WebSocket-only faults
// end the HTTP stream with a drop.
func TestSSEMatchesWebSocket(t *testing.T) {
	tests := []struct {
		fault   Fault
		wantSSE []string // nil = the WebSocket trace
	}{
		{fault: FaultNone},
		{fault: FaultFailed},
		{fault: FaultIncomplete},
		{fault: FaultError},
		{fault: "error:429"},
		{fault: "error:503"},
		{fault: FaultErrorNoStatus},
		{fault: FaultOverloaded},
		{fault: FaultOverloadedFailed},
		{fault: FaultContextLength},
		{fault: FaultContextLengthError},
		{fault: FaultBadJSON},
		{fault: FaultDrop},
		{fault: FaultBinary, wantSSE: []string{evRateLimits, evCreated, trDrop}},
		{fault: FaultConnLimit, wantSSE: []string{evRateLimits, trDrop}},
		{fault: FaultClose1008, wantSSE: []string{evRateLimits, trDrop}},
	}
	acct := Account{Name: "a", Token: "tok-a", Windows: []Window{{Length: time.Hour, Budget: 1000}}}
	for _, tt := range tests {
		for _, via := range []string{"metadata", "FaultNext"} {
			if tt.fault == FaultNone && via == "FaultNext" {
				continue
			}
			name := string(tt.fault)
			if name == "" {
				name = "none"
			}
			t.Run(name+"/"+via, func(t *testing.T) {
				s := newServer(t, Options{Words: 3, Accounts: []Account{acct}})
				cl := httpClient(t)
				var md map[string]string
				arm := func() {}
				if via == "metadata" {
					md = map[string]string{"sim_fault": string(tt.fault)}
				} else {
					arm = func() { s.Faults.Next(AtResponse, 1, tt.fault) }
				}
				c, _, err := dial(t, s.URL, bearer("tok-a"))
				if err != nil {
					t.Fatal(err)
				}
				arm()
				wsTr, wsEvs := wsTrace(t, c, createFrame("same prompt", md))
				arm()
				sseTr, sseEvs := sseTrace(t, cl, s.HTTPURL, bearer("tok-a"), streamBody("same prompt", md))

				if wsTr[0] != evRateLimits {
					t.Errorf("WebSocket trace %v does not start with %s", wsTr, evRateLimits)
				}
				want := tt.wantSSE
				if want == nil {
					want = wsTr
				}
				if !slices.Equal(sseTr, want) {
					t.Fatalf("SSE trace\n got %v\nwant %v (WebSocket %v)", sseTr, want, wsTr)
				}
				if got, want := textOf(sseEvs), textOf(wsEvs); tt.wantSSE == nil && got != want {
					t.Errorf("SSE text %q, WebSocket text %q", got, want)
				}
				if tt.fault == FaultNone && textOf(sseEvs) != Answer("same prompt", 3) {
					t.Errorf("SSE text %q, want Answer %q", textOf(sseEvs), Answer("same prompt", 3))
				}
				for i, e := range sseEvs {
					if tt.wantSSE != nil {
						break
					}
					if got, want := e.get("sequence_number"), wsEvs[i].get("sequence_number"); got != want {
						t.Errorf("%s sequence_number %v over SSE, %v over WebSocket", e.typ(), got, want)
					}
				}
				st := s.Stats()
				if st.SSEResponses != 1 || st.Responses != 2 {
					t.Errorf("stats %+v, want 2 responses, 1 over SSE", st)
				}
			})
		}
	}
}

func TestSSEUsageAuthAndRefusals(t *testing.T) {
	acct := Account{Name: "a", Token: "tok-a", PlanType: "plus", Windows: []Window{{Length: time.Hour, Budget: 2}}}
	s := newServer(t, Options{Words: 2, Accounts: []Account{acct}})
	cl := httpClient(t)
	ctx := context.Background()

	resp := post(ctx, t, cl, s.HTTPURL, bearer("tok-a"), streamBody("x", nil))
	if got := resp.Header.Get("x-codex-primary-used-percent"); got != "0" {
		t.Errorf("x-codex-primary-used-percent %q, want 0", got)
	}
	if _, err := readSSE(resp); err != nil {
		t.Fatal(err)
	}
	resp = post(ctx, t, cl, s.HTTPURL, bearer("tok-a"), streamBody("x", nil))
	if got := resp.Header.Get("x-codex-primary-used-percent"); got != "50" {
		t.Errorf("second x-codex-primary-used-percent %q, want 50", got)
	}
	readSSE(resp)

	resp = post(ctx, t, cl, s.HTTPURL, bearer("tok-a"), streamBody("x", nil))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("exhausted: %d, want 429", resp.StatusCode)
	}
	body := rejectBody(t, resp)
	if body["type"] != codeUsageLimit || body["code"] != codeUsageLimit || body["plan_type"] != "plus" {
		t.Errorf("429 body %v, want usage_limit_reached with plan_type plus", body)
	}
	ra := resp.Header.Get("Retry-After")
	if ra == "" || ra == "0" {
		t.Errorf("Retry-After %q, want the seconds to the reset", ra)
	}
	if resetsIn, _ := body["resets_in_seconds"].(float64); resetsIn < 3500 || resetsIn > 3600 {
		t.Errorf("resets_in_seconds %v, want about 3600", body["resets_in_seconds"])
	}
	if got := resp.Header.Get("x-codex-primary-used-percent"); got != "100" {
		t.Errorf("429 x-codex-primary-used-percent %q, want 100", got)
	}

	refusals := []struct {
		name   string
		h      http.Header
		body   string
		setup  func()
		status int
		code   string
	}{
		{name: "no token", body: `{"input":"x","stream":true}`, status: 401, code: "invalid_api_key"},
		{name: "wrong token", h: bearer("nope"), body: `{"input":"x","stream":true}`, status: 401, code: "invalid_api_key"},
		{name: "not JSON", h: bearer("tok-a"), body: `{"input":`, status: 400, code: "invalid_request"},
		{name: "RejectNext", h: bearer("tok-a"), body: `{"input":"x"}`, setup: func() { s.Faults.Reject(1, 503, time.Second) }, status: 503, code: "server_error"},
	}
	for _, r := range refusals {
		if r.setup != nil {
			r.setup()
		}
		resp := post(ctx, t, cl, s.HTTPURL, r.h, []byte(r.body))
		if resp.StatusCode != r.status {
			t.Errorf("%s: %d, want %d", r.name, resp.StatusCode, r.status)
			continue
		}
		if got := rejectBody(t, resp)["code"]; got != r.code {
			t.Errorf("%s: code %v, want %s", r.name, got, r.code)
		}
	}
	st := s.Stats()
	if st.HTTPRejected != 5 || st.Unauthorized != 2 || st.UsageLimited != 1 || st.SSEResponses != 2 {
		t.Errorf("stats %+v, want 5 HTTP rejected, 2 unauthorized, 1 usage limited, 2 SSE responses", st)
	}
	if as := s.Accounts.Stats("a"); as.SSEResponses != 2 || as.Completed != 2 || as.UsageLimited != 1 || as.Windows[0].Used != 2 {
		t.Errorf("account stats %+v, want 2 SSE responses, 2 completed, 1 usage limited, 2 used", as)
	}
}

func TestSSERequestShape(t *testing.T) {
	s := newServer(t, Options{Words: 1})
	cl := httpClient(t)
	ctx := context.Background()

	// Without Accept: text/event-stream, "stream": true is enough; with neither, 400.
	req, _ := http.NewRequest(http.MethodPost, s.HTTPURL, strings.NewReader(`{"input":"x","stream":true}`))
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := readSSE(resp)
	resp.Body.Close()
	if err != nil || len(evs) == 0 || evs[len(evs)-1].name != evCompleted {
		t.Fatalf("stream:true without Accept: %v %v, want a completed stream", evs, err)
	}
	req, _ = http.NewRequest(http.MethodPost, s.HTTPURL, strings.NewReader(`{"input":"x"}`))
	resp, err = cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no stream, no Accept: %d, want 400", resp.StatusCode)
	}
	resp.Body.Close()

	h := http.Header{"Chatgpt-Account-Id": {"acct-9"}}
	body := streamBody("shape", nil)
	readSSE(post(ctx, t, cl, s.HTTPURL, h, body))
	gotH, gotBody := s.LastHTTPRequest()
	if gotH.Get("ChatGPT-Account-Id") != "acct-9" || gotH.Get("Accept") != "text/event-stream" || string(gotBody) != string(body) {
		t.Errorf("LastHTTPRequest %v %s, want the request's headers and body", gotH, gotBody)
	}
	if s.LastUpgradeHeader() != nil {
		t.Errorf("LastUpgradeHeader %v after HTTP requests only, want nil", s.LastUpgradeHeader())
	}
}

func TestWSOff(t *testing.T) {
	s := newServer(t, Options{Words: 1, WSOff: true})
	cl := httpClient(t)
	wantWS := func(on bool) {
		t.Helper()
		c, resp, err := dial(t, s.URL, nil)
		if on {
			if err != nil {
				t.Fatalf("upgrade with WebSockets on: %v", err)
			}
			c.Close()
			return
		}
		if err == nil || resp == nil || resp.StatusCode != http.StatusUpgradeRequired {
			t.Fatalf("upgrade with WebSockets off: err %v resp %v, want 426", err, resp)
		}
		if code := rejectBody(t, resp)["code"]; code != "upgrade_required" {
			t.Errorf("426 code %v, want upgrade_required", code)
		}
	}
	wantSSE := func() {
		t.Helper()
		if tr, _ := sseTrace(t, cl, s.HTTPURL, nil, streamBody("x", nil)); tr[len(tr)-1] != evCompleted {
			t.Errorf("HTTP streaming: %v, want a completed response", tr)
		}
	}
	// Refused upgrades consume no RejectNext rule: the POST after them gets it.
	s.Faults.Reject(1, http.StatusInternalServerError, 0)
	wantWS(false)
	if resp := post(context.Background(), t, cl, s.HTTPURL, nil, streamBody("x", nil)); resp.StatusCode != 500 {
		t.Errorf("POST after a refused upgrade: %d, want the queued 500", resp.StatusCode)
	}
	wantSSE()
	s.Limits.SetWSOff(false)
	wantWS(true)
	if code, _ := control(t, s, "POST", "/ws?off=true"); code != 200 {
		t.Fatalf("POST /ws?off=true: %d", code)
	}
	wantWS(false)
	wantSSE()
	if code, _ := control(t, s, "POST", "/ws?off=false"); code != 200 {
		t.Fatalf("POST /ws?off=false: %d", code)
	}
	wantWS(true)
	if code, _ := control(t, s, "POST", "/ws?off=maybe"); code != 400 {
		t.Errorf("POST /ws?off=maybe: %d, want 400", code)
	}
	if st := s.Stats(); st.Upgrades426 != 2 || st.UpgradesAccepted != 2 || st.UpgradesRejected != 2 {
		t.Errorf("stats %+v, want 2 upgrades rejected with 426, 2 accepted", st)
	}
}

// TestClientAborts checks which ends count as client aborts, over both transports.
func TestClientAborts(t *testing.T) {
	slow := map[string]string{"sim_latency_ms": "3600000"}
	tests := []struct {
		name      string
		md        map[string]string
		sse       bool
		end       func(t *testing.T, s *Server, closeClient func())
		wantAbort bool
	}{
		{name: "ws close mid-response", md: slow, end: func(_ *testing.T, _ *Server, cl func()) { cl() }, wantAbort: true},
		{name: "ws close during stall", md: map[string]string{"sim_fault": "stall"}, end: func(_ *testing.T, _ *Server, cl func()) { cl() }, wantAbort: true},
		{name: "ws server drops", md: slow, end: func(_ *testing.T, s *Server, _ func()) { s.CloseClientConnections() }},
		{name: "ws drop fault", md: map[string]string{"sim_fault": "drop"}},
		{name: "sse cancel mid-stream", md: slow, sse: true, end: func(_ *testing.T, _ *Server, cl func()) { cl() }, wantAbort: true},
		{name: "sse cancel during stall", md: map[string]string{"sim_fault": "stall"}, sse: true, end: func(_ *testing.T, _ *Server, cl func()) { cl() }, wantAbort: true},
		{name: "sse server drops", md: slow, sse: true, end: func(_ *testing.T, s *Server, _ func()) { s.CloseClientConnections() }},
		{name: "sse drop fault", md: map[string]string{"sim_fault": "drop"}, sse: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, Options{Words: 3})
			var closeClient func()
			var readRest func() error // reads to the end; the error the client sees
			if tt.sse {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				resp := post(ctx, t, httpClient(t), s.HTTPURL, nil, streamBody("abort", tt.md))
				br := bufio.NewReader(resp.Body)
				if err := readUntil(br, evCreated); err != nil {
					t.Fatalf("stream before its end: %v", err)
				}
				closeClient = cancel
				readRest = func() error { _, err := io.Copy(io.Discard, br); return err }
			} else {
				c := mustDial(t, s)
				send(t, c, createFrame("abort", tt.md))
				if e := readEvent(t, c); e.typ() != evCreated {
					t.Fatalf("got %s, want response.created", e.raw)
				}
				closeClient = func() { c.Close() }
				readRest = func() error { drainClose(t, c); return nil }
			}
			closed := time.Now()
			if tt.end != nil {
				tt.end(t, s, closeClient)
			}
			if !tt.wantAbort {
				readRest()
				closeClient()
				waitIdle(t, s)
				eventually(t, "HTTP stream finished", func() bool { return streams(s) == 0 })
				if st := s.Stats(); st.ClientAborts != 0 || !st.LastAbort.IsZero() {
					t.Errorf("ClientAborts %d LastAbort %v, want none for an end the server caused", st.ClientAborts, st.LastAbort)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
			defer cancel()
			if err := s.WaitAborts(ctx, 1); err != nil {
				t.Fatalf("WaitAborts: %v (stats %+v)", err, s.Stats())
			}
			st := s.Stats()
			if st.ClientAborts != 1 || st.LastAbort.Before(closed) {
				t.Errorf("ClientAborts %d LastAbort %v, want 1 after %v", st.ClientAborts, st.LastAbort, closed)
			}
			t.Logf("origin saw the abort %v after the client closed", st.LastAbort.Sub(closed))
			s.ResetStats()
			if st := s.Stats(); st.ClientAborts != 0 || !st.LastAbort.IsZero() {
				t.Errorf("after ResetStats: ClientAborts %d LastAbort %v, want zero", st.ClientAborts, st.LastAbort)
			}
		})
	}
}

// readUntil reads server-sent events until one named name.
func readUntil(br *bufio.Reader, name string) error {
	for {
		e, err := nextSSE(br)
		if err != nil {
			return err
		}
		if e.name == name {
			return nil
		}
	}
}

func streams(s *Server) int {
	s.conns.mu.Lock()
	defer s.conns.mu.Unlock()
	return len(s.conns.streams)
}

func TestSSEDroppedByCloseClientConnections(t *testing.T) {
	s := newServer(t, Options{Latency: time.Hour, Words: 2})
	resp := post(context.Background(), t, httpClient(t), s.HTTPURL, nil, streamBody("x", nil))
	br := bufio.NewReader(resp.Body)
	if err := readUntil(br, evCreated); err != nil {
		t.Fatal(err)
	}
	s.CloseClientConnections()
	if _, err := io.Copy(io.Discard, br); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("body after CloseClientConnections: %v, want unexpected EOF", err)
	}
	eventually(t, "stream handler gone", func() bool { return streams(s) == 0 })
	if st := s.Stats(); st.ClientAborts != 0 || st.Completed != 0 {
		t.Errorf("stats %+v, want no abort and nothing completed", st)
	}
}

// TestCloseEndsStreamsAndRefreshes closes a server with a stalled HTTP stream, one waiting for its
// next event and a slow refresh in flight, and checks Close returns with every goroutine gone.
func TestCloseEndsStreamsAndRefreshes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := NewServer(Options{Latency: time.Hour, Words: 2, Accounts: []Account{{Name: "a", Token: "tok-a"}}})
	cl := httpClient(t)
	var bodies []*bufio.Reader
	for _, md := range []map[string]string{{"sim_fault": "stall"}, nil} {
		resp := post(context.Background(), t, cl, s.HTTPURL, bearer("tok-a"), streamBody("x", md))
		br := bufio.NewReader(resp.Body)
		if err := readUntil(br, evCreated); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, br)
	}
	l, _ := s.Logins.Issue("a")
	s.Faults.Refresh(1, RefreshFaultSlow)
	refreshed := make(chan error, 1)
	go func() {
		resp, err := cl.Post(s.RefreshURL, "application/json", strings.NewReader(refreshBody(l.RefreshToken)))
		if err == nil {
			resp.Body.Close()
		}
		refreshed <- err
	}()
	eventually(t, "the slow refresh arrives", func() bool { return s.Stats().RefreshOK == 1 })

	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with streams and a slow refresh in flight", d)
	}
	for i, br := range bodies {
		if _, err := io.Copy(io.Discard, br); err == nil {
			t.Errorf("stream %d ended cleanly after Close, want an error", i)
		}
	}
	<-refreshed
	if st := s.Stats(); st.ClientAborts != 0 {
		t.Errorf("ClientAborts %d after Close, want 0: the server ended them", st.ClientAborts)
	}
	cl.CloseIdleConnections()
}
