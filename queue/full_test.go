package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// blocker is a Generator whose generations wait until released (or their context ends).
type blocker struct {
	started chan string   // request ids, as generations start
	release chan struct{} // closed to let every generation finish
}

func newBlocker() *blocker {
	return &blocker{started: make(chan string, 100), release: make(chan struct{})}
}

func (b *blocker) Generate(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
	b.started <- r.ID
	if emit != nil {
		if err := emit([]byte(`{"type":"response.created"}`)); err != nil {
			return nil, err
		}
	}
	select {
	case <-b.release:
		return instant(ctx, r, emit)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *blocker) waitStarted(t *testing.T) string {
	t.Helper()
	select {
	case id := <-b.started:
		return id
	case <-time.After(waitTimeout):
		t.Fatal("generation did not start")
		return ""
	}
}

// goRequest sends a request in the background; the reply (or error) arrives on the channel.
func goRequest(nc *nats.Conn, payload string, hdr nats.Header) <-chan *nats.Msg {
	ch := make(chan *nats.Msg, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		m, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: DefaultSubject, Data: []byte(payload), Header: hdr})
		if err != nil {
			m = &nats.Msg{Header: nats.Header{"Test-Error": {err.Error()}}}
		}
		ch <- m
	}()
	return ch
}

func recv(t *testing.T, ch <-chan *nats.Msg) *nats.Msg {
	t.Helper()
	select {
	case m := <-ch:
		if e := m.Header.Get("Test-Error"); e != "" {
			t.Fatalf("request failed: %s", e)
		}
		return m
	case <-time.After(waitTimeout):
		t.Fatal("no reply")
		return nil
	}
}

func TestFullWorkerForwardsToFreeWorker(t *testing.T) {
	ns := startServer(t)
	nc := connect(t, ns)
	blockA := newBlocker()
	// A high hop limit makes "every hand-back landed on A again" (p = 2^-31) impossible in practice.
	a := newService(t, ns, Config{WorkerID: "A", MaxInflight: 1, MaxHops: 30}, blockA)
	held := goRequest(nc, goodRequest, nil)
	blockA.waitStarted(t) // A is now full
	b := newService(t, ns, Config{WorkerID: "B", MaxInflight: 1, MaxHops: 30}, instant)

	const n = 20
	for i := range n {
		m := request(t, nc, DefaultSubject, goodRequest, nil)
		if code := m.Header.Get(schemas.HeaderServiceErrorCode); code != "" {
			t.Fatalf("request %d: error %s: %s", i, code, m.Data)
		}
		if w := m.Header.Get(schemas.HeaderWorker); w != "B" {
			t.Fatalf("request %d answered by %q, want B (A is full)", i, w)
		}
	}
	// NATS picks A for about half the deliveries; never once in 20 has p = 2^-20.
	if got := a.Stats().Forwarded; got == 0 {
		t.Error("A forwarded nothing although it was full and received requests")
	}
	if got := b.Stats().Completed; got != n {
		t.Errorf("B completed %d, want %d", got, n)
	}
	close(blockA.release)
	if m := recv(t, held); m.Header.Get(schemas.HeaderWorker) != "A" {
		t.Errorf("held request answered by %q, want A", m.Header.Get(schemas.HeaderWorker))
	}
}

func TestFullWorkerBusyAfterHops(t *testing.T) {
	ns := startServer(t)
	nc := connect(t, ns)
	blk := newBlocker()
	s := newService(t, ns, Config{MaxInflight: 1, MaxHops: 2}, blk)
	held := goRequest(nc, goodRequest, nil)
	blk.waitStarted(t)

	c := client.New(nc, client.Options{RetryBusy: -1})
	start := time.Now()
	_, err := c.Generate(context.Background(), []byte(goodRequest), nil)
	took := time.Since(start)
	var e *schemas.Error
	if !errors.As(err, &e) || e.Code != schemas.CodeWorkerBusy || e.Status != 429 {
		t.Fatalf("err = %v, want 429 worker_busy", err)
	}
	if took > time.Second {
		t.Errorf("busy answer took %v, want it fast", took)
	}
	st := s.Stats()
	if st.Forwarded != 2 || st.Busy != 1 || st.Errors[schemas.CodeWorkerBusy] != 1 {
		t.Errorf("forwarded=%d busy=%d errors[worker_busy]=%d, want 2, 1, 1 (two hand-backs, then 429)",
			st.Forwarded, st.Busy, st.Errors[schemas.CodeWorkerBusy])
	}
	if st.Requests != 4 {
		t.Errorf("requests = %d, want 4 (held, original, two hops)", st.Requests)
	}
	close(blk.release)
	if m := recv(t, held); m.Header.Get(schemas.HeaderServiceErrorCode) != "" {
		t.Errorf("held request failed: %s", m.Data)
	}
}

// TestServerNoRespondersGoesToPublisher pins down the NATS behaviour the draining worker works
// around: a message published by one connection with another client's reply subject and no
// subscriber produces no "no responders" status for that client.
func TestServerNoRespondersGoesToPublisher(t *testing.T) {
	ns := startServer(t)
	client, worker := connect(t, ns), connect(t, ns)
	inbox := nats.NewInbox()
	sub, err := client.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := worker.PublishMsg(&nats.Msg{Subject: "nobody.listens", Reply: inbox, Header: nats.Header{"X": {"1"}}}); err != nil {
		t.Fatal(err)
	}
	// Anything the server sent the client because of that publish is queued before this marker.
	if err := worker.Publish(inbox, []byte("marker")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "marker" {
		t.Errorf("client got %q (headers %v) before the marker; the server relayed no-responders to it", m.Data, m.Header)
	}
}
