package codextest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ioTimeout bounds every wait on the network in these tests; it is a deadline, never a pause.
const ioTimeout = 10 * time.Second

// newServer starts a Server closed at the end of the test, after checking no socket leaked.
func newServer(t *testing.T, opts Options) *Server {
	t.Helper()
	s := NewServer(opts)
	t.Cleanup(s.Close)
	return s
}

// dial upgrades to url; it returns the handshake response too (for rejections).
func dial(t *testing.T, url string, h http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	c, resp, err := websocket.DefaultDialer.DialContext(ctx, url, h)
	if c != nil {
		t.Cleanup(func() { c.Close() })
	}
	if resp != nil && resp.Body != nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return c, resp, err
}

func mustDial(t *testing.T, s *Server) *websocket.Conn {
	t.Helper()
	c, _, err := dial(t, s.URL, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return c
}

// createFrame is a response.create as the Codex client sends it.
func createFrame(prompt string, md map[string]string) []byte {
	req := map[string]any{
		"type":         "response.create",
		"model":        "gpt-5.1-codex",
		"instructions": "Be brief.",
		"input": []any{map[string]any{
			"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": prompt}},
		}},
		"tools": []any{}, "store": false, "stream": true,
	}
	if md != nil {
		req["metadata"] = md
	}
	b, _ := json.Marshal(req)
	return b
}

func send(t *testing.T, c *websocket.Conn, frame []byte) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// event is a decoded server event with its raw bytes.
type event struct {
	raw []byte
	m   map[string]any
}

func (e event) typ() string { s, _ := e.m["type"].(string); return s }

// get walks a dotted path through maps and (numeric) slice indexes.
func (e event) get(path string) any {
	var v any = e.m
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i := int(k[0] - '0')
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func readFrame(t *testing.T, c *websocket.Conn) (int, []byte, error) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	return c.ReadMessage()
}

func readEvent(t *testing.T, c *websocket.Conn) event {
	t.Helper()
	typ, data, err := readFrame(t, c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.TextMessage {
		t.Fatalf("got frame type %d, want text", typ)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("event %q is not a JSON object: %v", data, err)
	}
	if _, ok := m["sequence_number"].(float64); !ok {
		t.Fatalf("event %s has no numeric sequence_number", data)
	}
	return event{raw: data, m: m}
}

var terminal = map[string]bool{
	"response.completed": true, "response.failed": true, "response.incomplete": true, "error": true,
}

// readResponse reads events until a terminal one.
func readResponse(t *testing.T, c *websocket.Conn) []event {
	t.Helper()
	var evs []event
	for {
		e := readEvent(t, c)
		evs = append(evs, e)
		if terminal[e.typ()] {
			return evs
		}
	}
}

func types(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.typ()
	}
	return out
}

// textOf concatenates the deltas of evs.
func textOf(evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.typ() == "response.output_text.delta" {
			b.WriteString(e.m["delta"].(string))
		}
	}
	return b.String()
}

// expectClose reads until the socket ends and returns the close code (1006 for a TCP close).
func expectClose(t *testing.T, c *websocket.Conn) int {
	t.Helper()
	_, data, err := readFrame(t, c)
	if err == nil {
		t.Fatalf("got frame %q, want the socket to close", data)
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("socket still open after %v", ioTimeout)
	}
	return websocket.CloseAbnormalClosure
}

func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatalf("WaitIdle: %v (open sockets %d)", err, s.Stats().OpenSockets)
	}
}

func rejectBody(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var body struct {
		Error map[string]any `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("body %q is not JSON: %v", b, err)
	}
	if msg, _ := body.Error["message"].(string); msg == "" {
		t.Fatalf("body %q has no error.message", b)
	}
	return body.Error
}

// drainClose discards frames until the socket ends and returns the close code.
func drainClose(t *testing.T, c *websocket.Conn) int {
	t.Helper()
	for {
		_, _, err := readFrame(t, c)
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("socket still open after %v", ioTimeout)
		}
		return websocket.CloseAbnormalClosure
	}
}
