package codex

import (
	"context"
	"testing"

	"github.com/codexpool/codexpool/worker/codextest"
)

// eventFrames is one simulated response's events, as the origin sends them.
func eventFrames(tb testing.TB) [][]byte {
	tb.Helper()
	srv := codextest.NewServer(codextest.Options{})
	defer srv.Close()
	c, err := New(Config{URL: srv.URL, Token: "sk-bench-0123456789abcdef"})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	var frames [][]byte
	_, err = c.Generate(context.Background(), []byte(`{"type":"response.create","input":"Say hello"}`), func(ev Event) error {
		frames = append(frames, ev.Data)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return frames
}

// BenchmarkEventType classifies every event of one response: the per-event cost on the worker's
// hot path (found with the CPU profile of BenchmarkRoundTrip in package worker).
func BenchmarkEventType(b *testing.B) {
	frames := eventFrames(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range frames {
			if _, err := eventType(f); err != nil {
				b.Fatal(err)
			}
		}
	}
}
