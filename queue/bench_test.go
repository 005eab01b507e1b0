package queue

import (
	"context"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// BenchmarkOneShot is one request-reply through the service with a generator that answers at
// once. Compare with BenchmarkBareEcho: the difference is the queue's overhead per request.
func BenchmarkOneShot(b *testing.B) {
	ns := startServer(b)
	newService(b, ns, Config{}, instant)
	nc := connect(b, ns)
	ctx := context.Background()
	msg := func() *nats.Msg {
		return &nats.Msg{Subject: DefaultSubject, Data: []byte(goodRequest), Header: nats.Header{}}
	}
	b.ReportAllocs()
	for b.Loop() {
		m, err := nc.RequestMsgWithContext(ctx, msg())
		if err != nil || m.Header.Get(schemas.HeaderServiceErrorCode) != "" {
			b.Fatal(err, string(m.Data))
		}
	}
}

// BenchmarkBareEcho is plain NATS request-reply on the same kind of server: a subscriber that
// echoes the payload.
func BenchmarkBareEcho(b *testing.B) {
	ns := startServer(b)
	srv := connect(b, ns)
	if _, err := srv.QueueSubscribe("echo", "echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		b.Fatal(err)
	}
	if err := srv.Flush(); err != nil {
		b.Fatal(err)
	}
	nc := connect(b, ns)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: "echo", Data: []byte(goodRequest), Header: nats.Header{}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream100 streams 100 events per request through the service to the Go client.
func BenchmarkStream100(b *testing.B) {
	events := make([][]byte, 100)
	for i := range events {
		events[i] = []byte(`{"type":"response.output_text.delta","delta":"word ` + strconv.Itoa(i) + `"}`)
	}
	events[99] = []byte(`{"type":"response.completed","response":{"id":"resp_1","output_text":"..."}}`)
	ns := startServer(b)
	newService(b, ns, Config{}, genFunc(func(_ context.Context, _ *schemas.Request, emit func([]byte) error) ([]byte, error) {
		for _, ev := range events {
			if err := emit(ev); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}))
	c := client.New(connect(b, ns), client.Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if _, err := c.Stream(ctx, []byte(goodRequest), nil, func([]byte) error { n++; return nil }); err != nil || n != 100 {
			b.Fatal(err, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/event")
}
