package gateway_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
)

// BenchmarkUsageOverhead measures what usage accounting adds to a gateway request, side by side
// in one run against one pool (JetStream, instant simulator, one worker): each iteration sends
// the same one-shot request through a gateway without a Meter (off), through one with the usage
// store and an unlimited key (on: one asynchronous record), and through it with a key that has a
// requests-per-minute and a concurrency limit (limited: a KV compare-and-set per limit and a
// lease release). It reports each median and the differences to off.
//
//	go test -run XXX -bench UsageOverhead -benchtime 1000x ./gateway/
func BenchmarkUsageOverhead(b *testing.B) {
	p := newMeteredPool(b, false)
	ctx := context.Background()
	nc, err := queue.Connect(ctx, p.nats, "gateway-off", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil)) // the default info line per request
	off := httptest.NewServer(gateway.New(client.New(nc, client.Options{}), nc, gateway.Config{ClientKeys: meterKeys, Logger: log}))
	b.Cleanup(off.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	body := []byte(`{"input":"Say hello"}`)
	send := func(base, secret string) time.Duration {
		t0 := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/responses", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(out) == 0 {
			b.Fatalf("gateway answered %d: %s", resp.StatusCode, out)
		}
		return time.Since(t0)
	}
	for range 20 { // warm up: pooled sockets, HTTP connections, KV entries
		send(off.URL, "sk-free")
		send(p.urls[0], "sk-free")
		send(p.urls[0], "sk-metered")
	}
	var o, on, lim []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o = append(o, send(off.URL, "sk-free"))
		on = append(on, send(p.urls[0], "sk-free"))
		lim = append(lim, send(p.urls[0], "sk-metered"))
	}
	b.StopTimer()
	op, onp, lp := median(o), median(on), median(lim)
	b.ReportMetric(float64(op.Microseconds()), "off-p50-µs")
	b.ReportMetric(float64(onp.Microseconds()), "on-p50-µs")
	b.ReportMetric(float64(lp.Microseconds()), "limited-p50-µs")
	b.ReportMetric(float64((onp - op).Microseconds()), "on-added-p50-µs")
	b.ReportMetric(float64((lp - op).Microseconds()), "limited-added-p50-µs")
}
