package queue

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
)

func TestShutdownWaitsForInflight(t *testing.T) {
	ns := startServer(t)
	nc := connect(t, ns)
	blk := newBlocker()
	s := newService(t, ns, Config{WorkerID: "A"}, blk)
	held := goRequest(nc, goodRequest, nil)
	blk.waitStarted(t)

	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	waitClosed(t, s.stop.stopped)
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v while a generation was still running", err)
	default:
	}
	// Stopped: with nobody left, NATS itself answers new requests with no responders.
	_, err := nc.Request(DefaultSubject, []byte(goodRequest), waitTimeout)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("request after Stop: err = %v, want no responders", err)
	}
	close(blk.release)
	if m := recv(t, held); m.Header.Get(schemas.HeaderServiceErrorCode) != "" || m.Header.Get(schemas.HeaderWorker) != "A" {
		t.Errorf("in-flight request: %s %v, want A's success", m.Data, m.Header)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown = %v, want nil (everything finished within the grace)", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Shutdown did not return after the generation finished")
	}
}

// TestShutdownHandsBackPendingWithNobodyElse: messages already queued for a worker when it stops
// are handed back; with no other worker the client gets 503 unavailable at once, not a timeout.
func TestShutdownHandsBackPendingWithNobodyElse(t *testing.T) {
	ns := startServer(t)
	client := connect(t, ns)
	gen := &counted{Generator: instant}
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	s := newServiceHook(t, ns, Config{}, gen, func() {
		if first { // the handler runs one message at a time
			first = false
			close(entered)
			<-release
		}
	})

	const n = 6
	replies, err := client.SubscribeSync("_INBOX.pending.*")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := client.PublishRequest(DefaultSubject, "_INBOX.pending."+strconv.Itoa(i), []byte(goodRequest)); err != nil {
			t.Fatal(err)
		}
	}
	// The server has routed all n to the worker before the worker's UNSUB can arrive.
	if err := client.Flush(); err != nil {
		t.Fatal(err)
	}
	<-entered
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	waitClosed(t, s.stop.stopped)
	start := time.Now()
	close(release)

	seen := map[string]bool{}
	for range n {
		m, err := replies.NextMsg(waitTimeout)
		if err != nil {
			t.Fatalf("after %d replies: %v", len(seen), err)
		}
		seen[m.Subject] = true
		if e := errorOf(t, m); e.Code != schemas.CodeUnavailable || e.Status != 503 {
			t.Errorf("%s: got %d %s, want 503 unavailable", m.Subject, e.Status, e.Code)
		}
	}
	if len(seen) != n {
		t.Errorf("answered %d distinct requests, want %d", len(seen), n)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("answers took %v, want them fast", took)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if st := s.Stats(); st.Forwarded != n || gen.calls.Load() != 0 {
		t.Errorf("forwarded=%d generations=%d, want %d and 0", st.Forwarded, gen.calls.Load(), n)
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatal("timed out")
	}
}

// newServiceHook is newService with a hook run at the start of every handler call.
func newServiceHook(t *testing.T, ns *server.Server, cfg Config, gen Generator, hook func()) *Service {
	t.Helper()
	s := newService(t, ns, cfg, gen)
	s.testHook.Store(&hook)
	return s
}

func TestShutdownDuringBurst(t *testing.T) {
	ns := startServer(t)
	nc := connect(t, ns)
	blk := newBlocker()
	a := newService(t, ns, Config{WorkerID: "A", MaxInflight: 64}, blk)

	// A streamed generation on A that will be cut off.
	streamed := make(chan []*nats.Msg, 1)
	go func() { streamed <- collectStream(nc, `{"input":"hi","stream":true}`) }()
	blk.waitStarted(t)

	newService(t, ns, Config{WorkerID: "B"}, instant)
	const burst = 40
	replies := make([]<-chan *nats.Msg, burst)
	for i := range replies {
		replies[i] = goRequest(nc, goodRequest, nil)
	}
	blk.waitStarted(t) // at least one of the burst runs on A (all 40 missing A has p = 2^-40)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want the grace's deadline error (generations were cut off)", err)
	}

	var okB, unavailableA int
	for i, ch := range replies {
		m := recv(t, ch)
		worker := m.Header.Get(schemas.HeaderWorker)
		if m.Header.Get(schemas.HeaderServiceErrorCode) == "" {
			if worker != "B" {
				t.Errorf("request %d succeeded on %q; A's generations never finish", i, worker)
			}
			okB++
			continue
		}
		if e := errorOf(t, m); e.Code != schemas.CodeUnavailable || worker != "A" {
			t.Errorf("request %d: %d %s from %q, want success or 503 unavailable from A", i, e.Status, e.Code, worker)
		}
		unavailableA++
	}
	if okB+unavailableA != burst || unavailableA == 0 {
		t.Errorf("answered %d ok (B) + %d unavailable (A) of %d, want all answered and some cut off", okB, unavailableA, burst)
	}
	if st := a.Stats(); st.Inflight != 0 || st.Failed != uint64(unavailableA)+1 {
		t.Errorf("A: inflight=%d failed=%d, want 0 and %d", st.Inflight, st.Failed, unavailableA+1)
	}

	msgs := <-streamed
	if len(msgs) != 3 {
		t.Fatalf("stream: got %d messages, want 3 (event, error, sentinel)", len(msgs))
	}
	if e := errorOf(t, msgs[1]); e.Code != schemas.CodeUnavailable || msgs[1].Header.Get(schemas.HeaderSeq) != "2" {
		t.Errorf("stream error: %s seq %q, want unavailable seq 2", e.Code, msgs[1].Header.Get(schemas.HeaderSeq))
	}
	if last := msgs[2]; len(last.Data) != 0 || len(last.Header) != 0 {
		t.Errorf("stream did not end with the sentinel: %q %v", last.Data, last.Header)
	}

	for i := range 10 {
		m := request(t, nc, DefaultSubject, goodRequest, nil)
		if w := m.Header.Get(schemas.HeaderWorker); w != "B" || m.Header.Get(schemas.HeaderServiceErrorCode) != "" {
			t.Errorf("request %d after A stopped: worker %q, %s; want B's success", i, w, m.Data)
		}
	}
}

// collectStream sends a streaming request and returns its messages up to the sentinel (or what
// arrived before a failure).
func collectStream(nc *nats.Conn, payload string) []*nats.Msg {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(DefaultSubject, inbox, []byte(payload)); err != nil {
		return nil
	}
	var out []*nats.Msg
	for {
		m, err := sub.NextMsg(waitTimeout)
		if err != nil {
			return out
		}
		out = append(out, m)
		if len(m.Data) == 0 && len(m.Header) == 0 {
			return out
		}
	}
}
