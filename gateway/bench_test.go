package gateway_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/queue/client"
)

// BenchmarkOverhead measures what the gateway adds to a request, side by side in one run: each
// iteration sends the same request once straight through the Go client over NATS and once
// through the gateway over loopback HTTP (keep-alive connection), against an instant origin, and
// reports both medians and their difference (overhead-p50-µs). The gateway logs its line per
// request at info, as by default.
//
//	go test -run XXX -bench Overhead -benchtime 2000x ./gateway/
func BenchmarkOverhead(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(map[bool]string{false: "one-shot", true: "stream"}[stream], func(b *testing.B) {
			// The one log line per request at info, as a gateway runs by default.
			log := slog.New(slog.NewJSONHandler(io.Discard, nil))
			p := newPool(b, poolOptions{gw: gateway.Config{Logger: log}})
			cl := client.New(p.nc, client.Options{})
			body := []byte(`{"input":"Say hello"}`)
			if stream {
				body = []byte(`{"input":"Say hello","stream":true}`)
			}
			tr := &http.Transport{MaxIdleConnsPerHost: 4}
			b.Cleanup(tr.CloseIdleConnections)
			hc := &http.Client{Transport: tr}
			ctx := context.Background()

			direct := func() {
				var err error
				if stream {
					_, err = cl.Stream(ctx, body, nil, func([]byte) error { return nil })
				} else {
					_, err = cl.Generate(ctx, body, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			viaGateway := func() { benchPost(ctx, b, hc, p.srv.URL, "/v1/responses", body) }
			for range 20 { // warm up: pooled sockets, HTTP connection
				direct()
				viaGateway()
			}
			var d, g []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				direct()
				t1 := time.Now()
				viaGateway()
				d = append(d, t1.Sub(t0))
				g = append(g, time.Since(t1))
			}
			b.StopTimer()
			dp, gp := median(d), median(g)
			b.ReportMetric(float64(dp.Microseconds()), "direct-p50-µs")
			b.ReportMetric(float64(gp.Microseconds()), "gateway-p50-µs")
			b.ReportMetric(float64((gp - dp).Microseconds()), "overhead-p50-µs")
		})
	}
}

// benchPost sends body to path on the gateway at url with the test key over hc and drains the
// answer; anything but a 200 with a body fails the benchmark.
func benchPost(ctx context.Context, b *testing.B, hc *http.Client, url, path string, body []byte) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || n == 0 {
		b.Fatalf("%s answered %d with %d bytes", path, resp.StatusCode, n)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
