package codextest

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
)

func control(t *testing.T, s *Server, method, path string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.ControlURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: body %q is not JSON", method, path, b)
	}
	return resp.StatusCode, m
}

func TestControlEndpoints(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	s := newServer(t, Options{Words: 2})
	if !strings.HasSuffix(s.ControlURL, "/_sim") || !strings.HasPrefix(s.ControlURL, "http://127.0.0.1:") {
		t.Fatalf("ControlURL %q", s.ControlURL)
	}

	mustDial(t, s)
	code, st := control(t, s, "GET", "/stats")
	if code != 200 || st["upgrades_accepted"] != 1.0 || st["open_sockets"] != 1.0 {
		t.Fatalf("GET /stats: %d %v, want 200 with upgrades_accepted 1, open_sockets 1", code, st)
	}
	for _, k := range []string{"upgrades_rejected", "rejected_403", "responses", "completed", "reused_responses", "peak_open_sockets"} {
		if _, ok := st[k]; !ok {
			t.Errorf("stats JSON lacks %q: %v", k, st)
		}
	}

	if code, _ := control(t, s, "POST", "/reject?n=1&status=429&retry_after_ms=2000"); code != 200 {
		t.Fatalf("POST /reject: %d", code)
	}
	_, resp, _ := dial(t, s.URL, nil)
	if resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("after /reject: %v, want 429 with Retry-After 2", resp)
	}

	if code, _ := control(t, s, "POST", "/limit?rate=0.001&burst=1&retry_after_ms=1000"); code != 200 {
		t.Fatalf("POST /limit: %d", code)
	}
	mustDial(t, s)
	_, resp, _ = dial(t, s.URL, nil)
	if resp == nil || resp.StatusCode != 403 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("after /limit: %v, want 403 with Retry-After 1", resp)
	}
	if code, _ := control(t, s, "POST", "/limit?rate=0"); code != 200 {
		t.Fatalf("POST /limit rate=0: %d", code)
	}

	if code, _ := control(t, s, "POST", "/fault?n=1&kind=failed"); code != 200 {
		t.Fatalf("POST /fault: %d", code)
	}
	c := mustDial(t, s)
	send(t, c, createFrame("x", nil))
	if evs := readResponse(t, c); evs[len(evs)-1].typ() != "response.failed" {
		t.Fatalf("after /fault kind=failed: %s", evs[len(evs)-1].raw)
	}
	if code, _ := control(t, s, "POST", "/fault?n=1&kind=close1008&at=upgrade"); code != 200 {
		t.Fatalf("POST /fault at=upgrade: %d", code)
	}
	if code := expectClose(t, mustDial(t, s)); code != 1008 {
		t.Fatalf("after /fault at=upgrade: close %d, want 1008", code)
	}

	code, st = control(t, s, "POST", "/reset")
	if code != 200 || st["upgrades_accepted"] != 0.0 || st["rejected_403"] != 0.0 || st["responses"] != 0.0 {
		t.Fatalf("POST /reset: %d %v, want zeroed counters", code, st)
	}
	if st["open_sockets"].(float64) < 1 || st["peak_open_sockets"] != st["open_sockets"] {
		t.Errorf("after reset open %v peak %v: open sockets stay, peak restarts from them", st["open_sockets"], st["peak_open_sockets"])
	}

	code, _ = control(t, s, "POST", "/close_clients")
	if code != 200 {
		t.Fatalf("POST /close_clients: %d", code)
	}
	if code := expectClose(t, c); code != 1006 {
		t.Errorf("socket after /close_clients: close %d, want 1006", code)
	}
	waitIdle(t, s)

	bad := []struct{ method, path string }{
		{"POST", "/reject?n=x"},
		{"POST", "/reject?status=101"},
		{"POST", "/limit?rate=fast"},
		{"POST", "/fault?kind=bogus"},
		{"POST", "/fault?kind=failed&at=upgrade"},
	}
	for _, b := range bad {
		if code, m := control(t, s, b.method, b.path); code != 400 || m["error"] == nil {
			t.Errorf("%s %s: %d %v, want 400 with an error body", b.method, b.path, code, m)
		}
	}
	if code, _ := control(t, s, "GET", "/reject"); code != 405 {
		t.Errorf("GET /reject: %d, want 405", code)
	}
	if code, _ := control(t, s, "POST", "/stats"); code != 405 {
		t.Errorf("POST /stats: %d, want 405", code)
	}
	if code, _ := control(t, s, "POST", "/nope"); code != 404 {
		t.Errorf("POST /nope: %d, want 404", code)
	}
}

func TestResetForgetsQueuedFaults(t *testing.T) {
	s := newServer(t, Options{Words: 1})
	s.Faults.Reject(5, 500, 0)
	s.Faults.Next(AtResponse, 5, FaultFailed)
	s.Faults.Next(AtUpgrade, 5, FaultDrop)
	s.Faults.Clear()
	c := mustDial(t, s)
	send(t, c, createFrame("x", nil))
	if evs := readResponse(t, c); evs[len(evs)-1].typ() != "response.completed" {
		t.Fatalf("after Faults.Clear: %s, want completed", evs[len(evs)-1].raw)
	}
}

func TestCloseClientConnections(t *testing.T) {
	s := newServer(t, Options{Latency: 1 << 40, Words: 1})
	a, b := mustDial(t, s), mustDial(t, s)
	send(t, a, createFrame("in flight", nil))
	readEvent(t, a)
	s.CloseClientConnections()
	if code := drainClose(t, a); code != 1006 {
		t.Errorf("in-flight socket: close %d, want 1006 (no Close frame)", code)
	}
	if code := expectClose(t, b); code != 1006 {
		t.Errorf("idle socket: close %d, want 1006", code)
	}
	waitIdle(t, s)
	c := mustDial(t, s) // still listening
	send(t, c, []byte(`{"type":"response.create","input":"x","metadata":{"sim_latency_ms":"0"}}`))
	if evs := readResponse(t, c); evs[len(evs)-1].typ() != "response.completed" {
		t.Errorf("after CloseClientConnections: %s", evs[len(evs)-1].raw)
	}
}

// TestCloseLeavesNothing closes a server with an idle socket, a stalled response, a response in
// flight and a hung upgrade, and checks every goroutine and socket is gone when Close returns.
func TestCloseLeavesNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := NewServer(Options{Latency: 1 << 40, Words: 3})
	idle := mustDial(t, s)
	stalled := mustDial(t, s)
	send(t, stalled, createFrame("s", map[string]string{"sim_fault": "stall"}))
	readEvent(t, stalled)
	busy := mustDial(t, s)
	send(t, busy, createFrame("b", nil))
	readEvent(t, busy)

	s.Faults.Next(AtUpgrade, 1, FaultHangUpgrade)
	hung := make(chan error, 1)
	go func() {
		c, _, err := websocket.DefaultDialer.Dial(s.URL, nil)
		if c != nil {
			c.Close()
		}
		hung <- err
	}()
	// Wait until the hung upgrade has reached the server.
	for s.Stats().Faults == 0 {
		select {
		case err := <-hung:
			t.Fatalf("hung dial returned early: %v", err)
		default:
			runtime.Gosched()
		}
	}

	s.Close()
	if st := s.Stats(); st.OpenSockets != 0 {
		t.Errorf("OpenSockets %d after Close, want 0", st.OpenSockets)
	}
	if err := <-hung; err == nil {
		t.Error("hung upgrade succeeded, want an error once the server closed")
	}
	for _, c := range []*websocket.Conn{idle, stalled, busy} {
		if code := drainClose(t, c); code != 1006 {
			t.Errorf("close %d, want 1006", code)
		}
	}
	if _, _, err := dial(t, s.URL, nil); err == nil {
		t.Error("dial after Close succeeded")
	}
	s.Close() // idempotent
}

// TestControlRouting: the mux answers every path under ControlURL as the hand-written router
// did: 405 with a JSON body (HEAD included) for the wrong method, an unknown path being POST's,
// 404 for a POST to an unknown path.
func TestControlRouting(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	s := newServer(t, Options{})
	tests := []struct {
		name, method, path string
		want               int
	}{
		{name: "HEAD of a GET endpoint", method: "HEAD", path: "/stats", want: 405},
		{name: "PUT of a POST endpoint", method: "PUT", path: "/reset", want: 405},
		{name: "GET of a POST endpoint", method: "GET", path: "/close_clients", want: 405},
		{name: "the prefix itself", method: "POST", path: "", want: 404},
		{name: "GET of the prefix", method: "GET", path: "", want: 405},
		{name: "the prefix with a slash", method: "POST", path: "/", want: 404},
		{name: "a trailing slash", method: "POST", path: "/stats/", want: 404},
		{name: "GET of an unknown path", method: "GET", path: "/stats/", want: 405},
		{name: "GET stats", method: "GET", path: "/stats", want: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, s.ControlURL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.path, resp.StatusCode, b, tt.want)
			}
			if tt.method != "HEAD" && !json.Valid(b) {
				t.Errorf("%s %s: body %q is not JSON", tt.method, tt.path, b)
			}
		})
	}
}
