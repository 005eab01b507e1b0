package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gateway"
)

// BenchmarkChatOverhead measures what the Chat Completions translation adds over the Responses
// path (issue 23's target: ≤ 1 ms p50): each iteration sends the same prompt through the gateway
// once as POST /v1/responses and once as POST /v1/chat/completions, against an instant origin,
// and reports both medians and their difference (chat-overhead-p50-µs).
//
//	go test -run XXX -bench ChatOverhead -benchtime 2000x ./gateway/
func BenchmarkChatOverhead(b *testing.B) {
	benchOverhead(b, "chat", "/v1/chat/completions", func(stream string) []byte {
		return []byte(`{"model":"gpt-5.1-codex","messages":[{"role":"user","content":"Say hello"}],"stream":` + stream + `}`)
	})
}

// benchOverhead runs the comparison of BenchmarkChatOverhead for the translated route path,
// whose body (with "stream" set to "true" or "false") asks what the Responses body does; name
// prefixes the metrics.
func benchOverhead(b *testing.B, name, path string, body func(stream string) []byte) {
	for _, stream := range []bool{false, true} {
		b.Run(map[bool]string{false: "one-shot", true: "stream"}[stream], func(b *testing.B) {
			log := slog.New(slog.NewJSONHandler(io.Discard, nil))
			p := newPool(b, poolOptions{gw: gateway.Config{Logger: log}})
			tr := &http.Transport{MaxIdleConnsPerHost: 4}
			b.Cleanup(tr.CloseIdleConnections)
			hc := &http.Client{Transport: tr}
			s := map[bool]string{false: "false", true: "true"}[stream]
			responses := []byte(`{"model":"gpt-5.1-codex","input":"Say hello","stream":` + s + `}`)
			translated := body(s)
			send := func(path string, body []byte) { benchPost(context.Background(), b, hc, p.srv.URL, path, body) }
			for range 20 {
				send("/v1/responses", responses)
				send(path, translated)
			}
			var r, c []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				send("/v1/responses", responses)
				t1 := time.Now()
				send(path, translated)
				r = append(r, t1.Sub(t0))
				c = append(c, time.Since(t1))
			}
			b.StopTimer()
			rp, cp := median(r), median(c)
			b.ReportMetric(float64(rp.Microseconds()), "responses-p50-µs")
			b.ReportMetric(float64(cp.Microseconds()), name+"-p50-µs")
			b.ReportMetric(float64((cp - rp).Microseconds()), name+"-overhead-p50-µs")
		})
	}
}
