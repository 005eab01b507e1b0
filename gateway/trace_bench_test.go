package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/tracing"
	"github.com/codexpool/codexpool/internal/tracing/export"
	"github.com/codexpool/codexpool/worker/codextest"
)

// BenchmarkTracingOverhead compares two pools side by side in one run, one with tracing off and
// one exporting every span (gateway and worker, the batch processor, OTLP/HTTP to a collector
// stand-in that drops what it gets): each iteration sends a streamed request through each gateway in turn
// (latency: the p50 of both, and on/off), then 16 clients send requests to each pool for 100 ms
// in turn, in at least 10 pairs of windows (throughput: requests per second of both, and the
// median of the pairs' on/off). Against an instant origin (the
// worst case: the pool's own work is all there is) and one that takes 20 ms per response; and
// against the instant origin again with one trace in 10 sampled (parentbased_traceidratio 0.1,
// as a busy fleet would export).
//
//	go test -run XXX -bench 'TracingOverhead/instant' -benchtime 2000x -count 3 ./gateway/
//	go test -run XXX -bench 'TracingOverhead/origin-20ms' -benchtime 200x -count 3 ./gateway/
func BenchmarkTracingOverhead(b *testing.B) {
	b.Run("instant", func(b *testing.B) { benchTracing(b, 0, export.Config{}) })
	b.Run("origin-20ms", func(b *testing.B) { benchTracing(b, 20*time.Millisecond, export.Config{}) })
	// Tracing on and nothing sampled: what carrying the trace context alone costs.
	b.Run("instant-none-sampled", func(b *testing.B) { benchTracing(b, 0, export.Config{Sampler: "always_off"}) })
	b.Run("instant-sampled-10%", func(b *testing.B) {
		benchTracing(b, 0, export.Config{Sampler: "parentbased_traceidratio", SamplerArg: "0.1"})
	})
}

// benchTracing runs the comparison against an origin taking latency per response, the traced
// pool exporting as sampling says (its Sampler and SamplerArg).
func benchTracing(b *testing.B, latency time.Duration, sampling export.Config) {
	// A collector that takes the spans and drops them: a real one runs elsewhere, and decoding
	// here would count its work as the pool's.
	var spans, bytesIn atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		bytesIn.Add(n)
		spans.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	provider := func(service string) *export.Provider {
		tp, err := export.New(context.Background(), export.Config{Endpoint: sink.URL, ServiceName: service,
			Sampler: sampling.Sampler, SamplerArg: sampling.SamplerArg})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return tp
	}
	log := func() *slog.Logger { return slog.New(tracing.LogHandler(slog.NewJSONHandler(io.Discard, nil))) }
	sim := codextest.Options{Latency: latency}
	off := newPool(b, poolOptions{sim: sim, gw: gateway.Config{Logger: log()}})
	on := newPool(b, poolOptions{sim: sim, gw: gateway.Config{Logger: log(), TracerProvider: provider("gateway")},
		workerTracer: provider("worker")})

	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	body := []byte(`{"input":"Say hello","stream":true}`)
	send := func(p *pool) { benchPost(context.Background(), b, hc, p.srv.URL, "/v1/responses", body) }
	// rate is the requests per second 16 clients get from p in d.
	rate := func(p *pool, d time.Duration) float64 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		n := 0
		end := time.Now().Add(d)
		for range 16 {
			wg.Go(func() {
				for time.Now().Before(end) {
					send(p)
					mu.Lock()
					n++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return float64(n) / d.Seconds()
	}
	for range 50 { // warm up: pooled sockets, HTTP connections
		send(off)
		send(on)
	}
	var lOff, lOn []time.Duration
	var rOff, rOn float64
	b.ResetTimer()
	// Each pair and each pair of windows goes in turn, off first then on first, so that neither
	// pool always runs right after the other's work (a warm cache, a GC the other left behind).
	for i := 0; i < b.N; i++ {
		first, second := off, on
		if i%2 == 1 {
			first, second = on, off
		}
		t0 := time.Now()
		send(first)
		t1 := time.Now()
		send(second)
		d1, d2 := t1.Sub(t0), time.Since(t1)
		if first == on {
			d1, d2 = d2, d1
		}
		lOff, lOn = append(lOff, d1), append(lOn, d2)
	}
	// Many short windows in pairs rather than a few long ones, and the median of the pairs'
	// ratios: the machine's noise (other processes, a GC of the shared heap) falls on one
	// window of one pool at a time, and the median leaves those pairs out.
	rounds := max(10, b.N/50, int(latency/(2*time.Millisecond)))
	var ratios []float64
	for i := range rounds {
		var a, c float64
		if i%2 == 0 {
			a = rate(off, 100*time.Millisecond)
			c = rate(on, 100*time.Millisecond)
		} else {
			c = rate(on, 100*time.Millisecond)
			a = rate(off, 100*time.Millisecond)
		}
		rOff, rOn = rOff+a, rOn+c
		ratios = append(ratios, c/a)
	}
	slices.Sort(ratios)
	b.StopTimer()
	po, pn := median(lOff), median(lOn)
	b.ReportMetric(float64(po.Microseconds()), "off-p50-µs")
	b.ReportMetric(float64(pn.Microseconds()), "on-p50-µs")
	b.ReportMetric(float64(pn-po)/float64(po)*100, "p50-added-%")
	b.ReportMetric(rOff/float64(rounds), "off-req/s")
	b.ReportMetric(rOn/float64(rounds), "on-req/s")
	b.ReportMetric((1-ratios[len(ratios)/2])*100, "throughput-lost-%")
	b.ReportMetric(float64(spans.Load()), "exports")
	b.ReportMetric(float64(bytesIn.Load())/float64(b.N), "export-B/op")
}
