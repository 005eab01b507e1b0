package codextest

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// faultCases says, for every response-level fault, what a client must observe after sending one
// response.create. Each runs twice: through metadata sim_fault and through FaultNext.
var faultCases = []struct {
	fault Fault
	check func(t *testing.T, c *websocket.Conn)
}{
	{FaultDrop, func(t *testing.T, c *websocket.Conn) {
		expectTypes(t, c, "response.created")
		if code := expectClose(t, c); code != websocket.CloseAbnormalClosure {
			t.Errorf("close code %d, want 1006 (TCP close, no Close frame)", code)
		}
	}},
	{FaultFailed, func(t *testing.T, c *websocket.Conn) {
		evs := expectTypes(t, c, "response.created", "response.in_progress", "response.failed")
		e := evs[2]
		if e.get("response.status") != "failed" || e.get("response.error.code") != "server_error" || e.get("response.error.message") == "" {
			t.Errorf("response.failed %s, want status failed, error {code server_error, message}", e.raw)
		}
	}},
	{FaultIncomplete, func(t *testing.T, c *websocket.Conn) {
		evs := readResponse(t, c)
		e := evs[len(evs)-1]
		if e.typ() != "response.incomplete" || e.get("response.status") != "incomplete" ||
			e.get("response.incomplete_details.reason") != "max_output_tokens" {
			t.Errorf("last event %s, want response.incomplete with reason max_output_tokens", e.raw)
		}
		if textOf(evs) != Answer("faulty", 3) {
			t.Errorf("streamed %q before the incomplete end, want %q", textOf(evs), Answer("faulty", 3))
		}
	}},
	{FaultBadJSON, func(t *testing.T, c *websocket.Conn) {
		expectTypes(t, c, "response.created")
		typ, data, err := readFrame(t, c)
		if err != nil || typ != websocket.TextMessage || json.Valid(data) {
			t.Errorf("got type %d %q err %v, want a text frame that is not JSON", typ, data, err)
		}
	}},
	{FaultStall, func(t *testing.T, c *websocket.Conn) {
		expectTypes(t, c, "response.created")
		// Still in flight: another create is refused as busy, and nothing else arrives.
		send(t, c, createFrame("again", nil))
		e := readEvent(t, c)
		if e.get("error.code") != codeBusy {
			t.Fatalf("got %s, want the busy error of a response still in flight", e.raw)
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, data, err := c.ReadMessage()
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("stalled response sent %q (err %v), want nothing", data, err)
		}
	}},
	{FaultBinary, func(t *testing.T, c *websocket.Conn) {
		expectTypes(t, c, "response.created")
		if typ, _, err := readFrame(t, c); err != nil || typ != websocket.BinaryMessage {
			t.Errorf("got frame type %d err %v, want binary", typ, err)
		}
	}},
	{FaultError, func(t *testing.T, c *websocket.Conn) {
		e := expectTypes(t, c, "error")[0]
		if e.get("status") != 500.0 || e.get("error.type") != "server_error" || e.get("error.message") == "" {
			t.Errorf("error event %s, want status 500 server_error", e.raw)
		}
	}},
	{"error:429", func(t *testing.T, c *websocket.Conn) {
		e := expectTypes(t, c, "error")[0]
		resetsAt, _ := e.get("error.resets_at").(float64)
		if e.get("status") != 429.0 || e.get("error.type") != "usage_limit_reached" || resetsAt <= float64(time.Now().Unix()) {
			t.Errorf("error event %s, want status 429 usage_limit_reached with a future resets_at", e.raw)
		}
	}},
	{"error:503", func(t *testing.T, c *websocket.Conn) {
		if e := expectTypes(t, c, "error")[0]; e.get("status") != 503.0 {
			t.Errorf("error event %s, want status 503", e.raw)
		}
	}},
	{FaultErrorNoStatus, func(t *testing.T, c *websocket.Conn) {
		e := expectTypes(t, c, "error")[0]
		if _, ok := e.m["status"]; ok || e.get("error.message") == "" {
			t.Errorf("error event %s, want no status and a message", e.raw)
		}
	}},
	{FaultConnLimit, func(t *testing.T, c *websocket.Conn) {
		e := expectTypes(t, c, "error")[0]
		if e.get("status") != 400.0 || e.get("error.code") != codeConnLimit {
			t.Errorf("error event %s, want status 400 %s", e.raw, codeConnLimit)
		}
		if code := expectClose(t, c); code != websocket.CloseNormalClosure {
			t.Errorf("close code %d, want 1000", code)
		}
	}},
	{FaultOverloaded, func(t *testing.T, c *websocket.Conn) {
		e := expectTypes(t, c, "response.created", "response.in_progress", "error")[2]
		if _, ok := e.m["status"]; ok || e.get("error.type") != "service_unavailable_error" ||
			e.get("error.code") != codeOverloaded || e.get("error.message") == "" {
			t.Errorf("error event %s, want no status, service_unavailable_error %s", e.raw, codeOverloaded)
		}
	}},
	{FaultOverloadedFailed, func(t *testing.T, c *websocket.Conn) {
		e := expectTypes(t, c, "response.created", "response.in_progress", "response.failed")[2]
		if e.get("response.status") != "failed" || e.get("response.error.code") != codeOverloaded {
			t.Errorf("response.failed %s, want error.code %s", e.raw, codeOverloaded)
		}
	}},
	{FaultContextLength, func(t *testing.T, c *websocket.Conn) {
		e := expectTypes(t, c, "response.created", "response.in_progress", "response.failed")[2]
		if e.get("response.status") != "failed" || e.get("response.error.code") != codeContextLength ||
			!strings.Contains(e.get("response.error.message").(string), "exceeds the context window") {
			t.Errorf("response.failed %s, want error.code %s and the origin's message", e.raw, codeContextLength)
		}
	}},
	{FaultContextLengthError, func(t *testing.T, c *websocket.Conn) {
		e := expectTypes(t, c, "error")[0]
		if e.get("status") != 400.0 || e.get("error.type") != "invalid_request_error" || e.get("error.code") != codeContextLength {
			t.Errorf("error event %s, want status 400 invalid_request_error %s", e.raw, codeContextLength)
		}
	}},
	{FaultClose1008, func(t *testing.T, c *websocket.Conn) {
		if code := expectClose(t, c); code != websocket.ClosePolicyViolation {
			t.Errorf("close code %d, want 1008", code)
		}
	}},
}

// expectTypes reads len(want) events and checks their types.
func expectTypes(t *testing.T, c *websocket.Conn, want ...string) []event {
	t.Helper()
	evs := make([]event, len(want))
	for i := range want {
		evs[i] = readEvent(t, c)
	}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	return evs
}

func TestResponseFaults(t *testing.T) {
	for _, tc := range faultCases {
		for _, via := range []string{"metadata", "FaultNext"} {
			t.Run(string(tc.fault)+"/"+via, func(t *testing.T) {
				s := newServer(t, Options{Words: 3})
				c := mustDial(t, s)
				var md map[string]string
				if via == "metadata" {
					md = map[string]string{"sim_fault": string(tc.fault)}
				} else {
					s.Faults.Next(AtResponse, 1, tc.fault)
				}
				send(t, c, createFrame("faulty", md))
				tc.check(t, c)
				st := s.Stats()
				if st.Faults != 1 || st.Responses != 1 || st.Completed != 0 {
					t.Errorf("stats %+v, want 1 fault, 1 response, 0 completed", st)
				}
				// The fault is used up: a fresh socket gets a normal answer.
				c.Close()
				c2 := mustDial(t, s)
				send(t, c2, createFrame("healthy", nil))
				if evs := readResponse(t, c2); evs[len(evs)-1].typ() != "response.completed" {
					t.Errorf("next response ended with %s, want response.completed", evs[len(evs)-1].raw)
				}
				c2.Close()
				waitIdle(t, s)
			})
		}
	}
}

func TestFaultNextCountsDown(t *testing.T) {
	s := newServer(t, Options{Words: 1})
	s.Faults.Next(AtResponse, 2, FaultFailed)
	s.Faults.Next(AtResponse, 1, FaultIncomplete)
	c := mustDial(t, s)
	var got []string
	for range 4 {
		send(t, c, createFrame("n", nil))
		evs := readResponse(t, c)
		got = append(got, evs[len(evs)-1].typ())
	}
	want := []string{"response.failed", "response.failed", "response.incomplete", "response.completed"}
	if !slices.Equal(got, want) {
		t.Errorf("ends %v, want %v", got, want)
	}
}

func TestMetadataFaultTakesPrecedenceOverFaultNext(t *testing.T) {
	s := newServer(t, Options{Words: 1})
	s.Faults.Next(AtResponse, 1, FaultFailed)
	c := mustDial(t, s)
	send(t, c, createFrame("m", map[string]string{"sim_fault": ""}))
	if evs := readResponse(t, c); evs[len(evs)-1].typ() != "response.completed" {
		t.Fatalf("sim_fault \"\" ended with %s, want completed", evs[len(evs)-1].raw)
	}
	send(t, c, createFrame("m", nil))
	if evs := readResponse(t, c); evs[len(evs)-1].typ() != "response.failed" {
		t.Fatalf("queued fault not applied after a metadata override: %s", evs[len(evs)-1].raw)
	}
}

func TestUpgradeFaults(t *testing.T) {
	t.Run("hang_upgrade", func(t *testing.T) {
		s := newServer(t, Options{})
		s.Faults.Next(AtResponse, 1, FaultHangUpgrade) // upgrade-only: queued AtUpgrade
		d := websocket.Dialer{HandshakeTimeout: 300 * time.Millisecond}
		c, resp, err := d.Dial(s.URL, nil)
		var ne net.Error
		if err == nil || resp != nil || !errors.As(err, &ne) || !ne.Timeout() {
			if c != nil {
				c.Close()
			}
			t.Fatalf("dial: err %v resp %v, want a handshake timeout with no response", err, resp)
		}
		if st := s.Stats(); st.UpgradesRejected != 1 || st.Faults != 1 || st.UpgradesAccepted != 0 {
			t.Errorf("stats %+v, want 1 rejected, 1 fault", st)
		}
		mustDial(t, s) // used up
	})
	t.Run("drop", func(t *testing.T) {
		s := newServer(t, Options{})
		s.Faults.Next(AtUpgrade, 1, FaultDrop)
		if _, resp, err := dial(t, s.URL, nil); err == nil || resp != nil {
			t.Fatalf("dial: err %v resp %v, want a connection error with no response", err, resp)
		}
		mustDial(t, s)
	})
	t.Run("close1008", func(t *testing.T) {
		s := newServer(t, Options{})
		s.Faults.Next(AtUpgrade, 1, FaultClose1008)
		c := mustDial(t, s)
		if code := expectClose(t, c); code != websocket.ClosePolicyViolation {
			t.Errorf("close code %d, want 1008", code)
		}
		waitIdle(t, s)
		if st := s.Stats(); st.UpgradesAccepted != 1 || st.Faults != 1 {
			t.Errorf("stats %+v, want 1 accepted, 1 fault", st)
		}
	})
	t.Run("conn_limit", func(t *testing.T) {
		s := newServer(t, Options{})
		s.Faults.Next(AtUpgrade, 1, FaultConnLimit)
		c := mustDial(t, s)
		if e := readEvent(t, c); e.get("error.code") != codeConnLimit {
			t.Errorf("got %s, want the connection limit event", e.raw)
		}
		expectClose(t, c)
	})
	t.Run("before RejectNext", func(t *testing.T) {
		s := newServer(t, Options{})
		s.Faults.Reject(1, http.StatusInternalServerError, 0)
		s.Faults.Next(AtUpgrade, 1, FaultDrop)
		if _, resp, _ := dial(t, s.URL, nil); resp != nil {
			t.Fatalf("first dial got HTTP %d, want the drop", resp.StatusCode)
		}
		if _, resp, _ := dial(t, s.URL, nil); resp == nil || resp.StatusCode != 500 {
			t.Fatalf("second dial: %v, want the queued 500", resp)
		}
	})
	t.Run("response-level fault ignored", func(t *testing.T) {
		s := newServer(t, Options{})
		s.Faults.Next(AtUpgrade, 1, FaultFailed)
		mustDial(t, s)
		if st := s.Stats(); st.Faults != 0 {
			t.Errorf("Faults %d, want 0", st.Faults)
		}
	})
}

func TestParseFault(t *testing.T) {
	for _, s := range []string{"", "drop", "failed", "incomplete", "bad_json", "stall", "binary", "error",
		"error:429", "error:500", "error_nostatus", "conn_limit", "close1008", "hang_upgrade"} {
		if f, err := ParseFault(s); err != nil || string(f) != s {
			t.Errorf("ParseFault(%q) = %q, %v; want it back, nil", s, f, err)
		}
	}
	for _, s := range []string{"nope", "error:", "error:abc", "error:99", "error:600", "drop:1", "failed:500"} {
		if _, err := ParseFault(s); err == nil {
			t.Errorf("ParseFault(%q) succeeded, want an error", s)
		}
	}
}
