package codex

import (
	"context"
	"testing"

	"github.com/codexpool/codexpool/worker/codextest"
)

// benchGenerate runs one generation per iteration against a zero-latency simulator.
func benchGenerate(b *testing.B, noReuse bool) {
	srv := newSim(b, codextest.Options{})
	c := newClient(b, srv, Config{NoReuse: noReuse})
	frame := createFrame("benchmark prompt", nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Generate(ctx, frame, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st := srv.Stats()
	b.ReportMetric(float64(st.UpgradesAccepted)/float64(st.Responses), "upgrades/op")
}

// BenchmarkGeneratePooled: every generation after the first reuses the pooled socket.
func BenchmarkGeneratePooled(b *testing.B) { benchGenerate(b, false) }

// BenchmarkGenerateFresh: every generation opens (and closes) its own socket.
func BenchmarkGenerateFresh(b *testing.B) { benchGenerate(b, true) }
