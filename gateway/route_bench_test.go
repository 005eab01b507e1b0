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

// BenchmarkRouteOverhead measures what each route adds to a request, p50 and p99: every
// iteration sends the same prompt once straight through the Go client over NATS and once through
// the route over loopback HTTP, against the simulator, and reports the per-iteration difference
// (overhead-p50-µs, overhead-p99-µs). The route's body carries a tool and a tool round trip, so
// the translation has something to do. The file compiles against older trees too, so old and new
// can be run side by side.
//
//	go test -run XXX -bench RouteOverhead -benchtime 1000x ./gateway/
func BenchmarkRouteOverhead(b *testing.B) {
	routes := []struct{ name, path, body string }{
		{"responses", "/v1/responses", `{"model":"gpt-5.1-codex","instructions":"Be brief.","input":[` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"Say hello"}]},` +
			`{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},` +
			`{"type":"function_call_output","call_id":"call_1","output":"sunny"}],` +
			`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}],"stream":%s}`},
		{"chat", "/v1/chat/completions", `{"model":"gpt-5.1-codex","messages":[{"role":"system","content":"Be brief."},` +
			`{"role":"user","content":"Say hello"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"sunny"}],` +
			`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"stream":%s}`},
		{"messages", "/v1/messages", `{"model":"gpt-5.1-codex","max_tokens":1024,"system":"Be brief.","messages":[` +
			`{"role":"user","content":"Say hello"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}],` +
			`"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"stream":%s}`},
	}
	for _, rt := range routes {
		for _, stream := range []string{"false", "true"} {
			b.Run(rt.name+"/stream="+stream, func(b *testing.B) {
				log := slog.New(slog.NewJSONHandler(io.Discard, nil))
				p := newPool(b, poolOptions{gw: gateway.Config{Logger: log}})
				cl := client.New(p.nc, client.Options{})
				direct := []byte(`{"model":"gpt-5.1-codex","input":"Say hello","stream":` + stream + `}`)
				body := []byte(replaceStream(rt.body, stream))
				tr := &http.Transport{MaxIdleConnsPerHost: 4}
				b.Cleanup(tr.CloseIdleConnections)
				hc := &http.Client{Transport: tr}
				ctx := context.Background()
				viaNATS := func() {
					var err error
					if stream == "true" {
						_, err = cl.Stream(ctx, direct, nil, func([]byte) error { return nil })
					} else {
						_, err = cl.Generate(ctx, direct, nil)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				viaRoute := func() { benchPost(ctx, b, hc, p.srv.URL, rt.path, body) }
				for range 20 {
					viaNATS()
					viaRoute()
				}
				over := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					viaNATS()
					t1 := time.Now()
					viaRoute()
					over = append(over, time.Since(t1)-t1.Sub(t0))
				}
				b.StopTimer()
				slices.Sort(over)
				b.ReportMetric(float64(over[len(over)/2].Microseconds()), "overhead-p50-µs")
				b.ReportMetric(float64(over[len(over)*99/100].Microseconds()), "overhead-p99-µs")
			})
		}
	}
}

func replaceStream(body, stream string) string {
	return string(bytes.Replace([]byte(body), []byte("%s"), []byte(stream), 1))
}
