package queue_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// BenchmarkRoundTrip measures the whole path in one process: Go client → NATS → queue service →
// worker → pooled Codex socket → zero-latency simulator → reply. Compare it with
// BenchmarkNATSEcho (the same NATS request-reply with an echo responder): the difference is
// codexpool's own overhead per request.
func BenchmarkRoundTrip(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%v", stream), func(b *testing.B) {
			nc, subject := startPool(b)
			cl := client.New(nc, client.Options{Subject: subject})
			body := []byte(`{"input":"Say hello","stream":` + fmt.Sprint(stream) + `}`)
			var failed atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var err error
					if stream {
						_, err = cl.Stream(context.Background(), body, nil, func([]byte) error { return nil })
					} else {
						_, err = cl.Generate(context.Background(), body, nil)
					}
					if err != nil {
						failed.Add(1)
					}
				}
			})
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d requests failed", n)
			}
		})
	}
}

// BenchmarkNATSEcho is the ceiling: a bare request-reply echo on the same kind of server.
func BenchmarkNATSEcho(b *testing.B) {
	ns, err := embedded.Start("127.0.0.1:0", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	srvConn, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srvConn.Close)
	if _, err := srvConn.QueueSubscribe("echo", "g", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	body := []byte(`{"input":"Say hello"}`)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := nc.Request("echo", body, 5*time.Second); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func startPool(b *testing.B) (*nats.Conn, string) {
	b.Helper()
	ns, err := embedded.Start("127.0.0.1:0", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	sim := codextest.NewServer(codextest.Options{})
	b.Cleanup(sim.Close)
	w, err := worker.New(worker.Config{ID: "bench-1", URL: sim.URL, Token: "bench"}, worker.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	wc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(wc.Close)
	svc, err := queue.NewService(wc, queue.Config{WorkerID: w.ID(), WorkerStats: w.StatsData}, w)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc, queue.DefaultSubject
}
