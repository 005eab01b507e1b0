package codextest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// httpClient returns a client whose idle connections close at the end of the test (goleak).
func httpClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: ioTimeout}
}

// streamBody is the HTTP streaming body for prompt: createFrame without "type".
func streamBody(prompt string, md map[string]string) []byte {
	var m map[string]any
	_ = json.Unmarshal(createFrame(prompt, md), &m)
	delete(m, "type")
	b, _ := json.Marshal(m)
	return b
}

func bearer(token string) http.Header {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

// post sends body to url as the Codex HTTP fallback does.
func post(ctx context.Context, t *testing.T, cl *http.Client, url string, h http.Header, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseEvent is one server-sent event: its event: name and data: payload.
type sseEvent struct {
	name string
	data []byte
}

// readSSE reads events until the body ends: err is nil at a clean end, else the read error
// (io.ErrUnexpectedEOF for a dropped connection).
func readSSE(resp *http.Response) ([]sseEvent, error) {
	br := bufio.NewReader(resp.Body)
	var evs []sseEvent
	for {
		e, err := nextSSE(br)
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, e)
	}
}

// nextSSE reads one event; io.EOF when the body ended cleanly between events.
func nextSSE(br *bufio.Reader) (sseEvent, error) {
	var e sseEvent
	started := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && !started {
				return e, io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return e, err
		}
		started = true
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return e, nil
		case strings.HasPrefix(line, "event: "):
			e.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			e.data = []byte(line[len("data: "):])
		}
	}
}

// Trace markers for ends that are not events.
const (
	trDrop    = "<drop>"     // TCP closed mid-response
	trBadJSON = "<bad_json>" // a frame or data line that is not JSON
	trBinary  = "<binary>"
	trClose   = "<close %d>"
)

// wsTrace sends frame on c and returns what the client sees until a terminal event or the end:
// event types, then a marker, and the decoded events.
func wsTrace(t *testing.T, c *websocket.Conn, frame []byte) ([]string, []event) {
	t.Helper()
	send(t, c, frame)
	var tr []string
	var evs []event
	for {
		typ, data, err := readFrame(t, c)
		if err != nil {
			var ce *websocket.CloseError
			var ne net.Error
			switch {
			case errors.As(err, &ce) && ce.Code != websocket.CloseAbnormalClosure:
				tr = append(tr, fmt.Sprintf(trClose, ce.Code))
			case errors.As(err, &ne) && ne.Timeout():
				t.Fatalf("no end after %v; trace so far %v", ioTimeout, tr)
			default:
				tr = append(tr, trDrop)
			}
			return tr, evs
		}
		if typ == websocket.BinaryMessage {
			return append(tr, trBinary), evs
		}
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return append(tr, trBadJSON), evs
		}
		e := event{raw: data, m: m}
		evs = append(evs, e)
		tr = append(tr, e.typ())
		if terminal[e.typ()] && e.get("error.code") != codeConnLimit {
			return tr, evs
		}
	}
}

// sseTrace posts body and returns what the client sees, as wsTrace does. It checks that each
// event's name is its JSON type.
func sseTrace(t *testing.T, cl *http.Client, url string, h http.Header, body []byte) ([]string, []event) {
	t.Helper()
	resp := post(context.Background(), t, cl, url, h, body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST: %d %q %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	raw, err := readSSE(resp)
	var tr []string
	var evs []event
	for _, se := range raw {
		var m map[string]any
		if json.Unmarshal(se.data, &m) != nil {
			tr = append(tr, trBadJSON)
			continue
		}
		e := event{raw: se.data, m: m}
		if se.name != e.typ() {
			t.Errorf("event: %q carries data of type %q", se.name, e.typ())
		}
		evs = append(evs, e)
		tr = append(tr, e.typ())
	}
	if err != nil {
		tr = append(tr, trDrop)
	}
	return tr, evs
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, ioTimeout)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a wait for the condition
	}
}
