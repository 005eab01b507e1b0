package codextest

import (
	"testing"

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
