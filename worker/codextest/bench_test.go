package codextest

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// BenchmarkGeneration is one full generation (8 words, 16 events) at zero latency over one
// reused socket: client write, server parse and stream, client reads until response.completed.
func BenchmarkGeneration(b *testing.B) {
	s := NewServer(Options{})
	defer s.Close()
	c, _, err := websocket.DefaultDialer.Dial(s.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	frame := createFrame("benchmark prompt", nil)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
			b.Fatal(err)
		}
		for events := 0; ; events++ {
			_, data, err := c.ReadMessage()
			if err != nil {
				b.Fatal(err)
			}
			if events == 15 {
				if string(data[:28]) != `{"type":"response.completed"` {
					b.Fatalf("16th event %s, want response.completed", data)
				}
				break
			}
		}
	}
}

// BenchmarkFreshSocketGeneration adds the upgrade: dial, one generation, close.
func BenchmarkFreshSocketGeneration(b *testing.B) {
	s := NewServer(Options{})
	defer s.Close()
	frame := createFrame("benchmark prompt", nil)
	b.ReportAllocs()
	for b.Loop() {
		c, _, err := websocket.DefaultDialer.Dial(s.URL, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
			b.Fatal(err)
		}
		for range 16 {
			if _, _, err := c.ReadMessage(); err != nil {
				b.Fatal(err)
			}
		}
		c.Close()
	}
}

// BenchmarkHTTPStreamGeneration is BenchmarkGeneration over the HTTP fallback: one POST per
// generation on a kept-alive connection, read as server-sent events until response.completed.
func BenchmarkHTTPStreamGeneration(b *testing.B) {
	s := NewServer(Options{})
	defer s.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	body := streamBody("benchmark prompt", nil)
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, s.HTTPURL, bytes.NewReader(body))
		req.Header.Set("Accept", "text/event-stream")
		resp, err := cl.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		evs, err := readSSE(resp)
		resp.Body.Close()
		if err != nil || len(evs) != 16 || evs[15].name != evCompleted {
			b.Fatalf("got %d events (err %v), want 16 ending with response.completed", len(evs), err)
		}
	}
}

// BenchmarkAccountGeneration is BenchmarkGeneration for an account with two usage windows: the
// codex.rate_limits event and the window bookkeeping on top.
func BenchmarkAccountGeneration(b *testing.B) {
	s := NewServer(Options{Accounts: []Account{{Name: "a", Token: "t",
		Windows: []Window{{Length: time.Hour}, {Length: 24 * time.Hour}}}}})
	defer s.Close()
	c, _, err := websocket.DefaultDialer.Dial(s.URL, http.Header{"Authorization": {"Bearer t"}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	frame := createFrame("benchmark prompt", nil)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
			b.Fatal(err)
		}
		for events := 0; ; events++ {
			_, data, err := c.ReadMessage()
			if err != nil {
				b.Fatal(err)
			}
			if events == 16 {
				if string(data[:28]) != `{"type":"response.completed"` {
					b.Fatalf("17th event %s, want response.completed", data)
				}
				break
			}
		}
	}
}
