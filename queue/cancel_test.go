package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// hanging emits one event (when streaming) and then waits for its context; it reports the
// context's cause when it ends.
type hanging struct {
	started chan string
	ended   chan error
}

func newHanging() *hanging {
	return &hanging{started: make(chan string, 10), ended: make(chan error, 10)}
}

func (h *hanging) Generate(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
	if emit != nil {
		if err := emit([]byte(`{"type":"response.created"}`)); err != nil {
			return nil, err
		}
	}
	h.started <- r.ID
	<-ctx.Done()
	h.ended <- context.Cause(ctx)
	return nil, ctx.Err()
}

func (h *hanging) waitEnded(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-h.ended:
		return err
	case <-time.After(within):
		t.Fatalf("the generation did not end within %s of the cancel", within)
		return nil
	}
}

func TestCancelStreamAnswersCancelledThenSentinel(t *testing.T) {
	ns := startServer(t)
	gen := newHanging()
	svc := newService(t, ns, Config{}, gen)
	nc := connect(t, ns)
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	m := &nats.Msg{Subject: DefaultSubject, Reply: inbox, Data: []byte(`{"input":"x","stream":true}`),
		Header: nats.Header{schemas.HeaderRequestID: {"cancel-me"}}}
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	first, err := sub.NextMsg(waitTimeout)
	if err != nil || first.Header.Get(schemas.HeaderSeq) != "1" {
		t.Fatalf("first event: %v %v", first, err)
	}
	<-gen.started
	if err := nc.Publish(schemas.DefaultCancelSubject, []byte("cancel-me")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if cause := gen.waitEnded(t, time.Second); cause != errCancelled {
		t.Errorf("generation ended with cause %v, want errCancelled", cause)
	}
	t.Logf("generation stopped %s after the cancel", time.Since(start))
	errMsg, err := sub.NextMsg(waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if e := errorOf(t, errMsg); e.Code != schemas.CodeCancelled || e.Status != 499 || errMsg.Header.Get(schemas.HeaderSeq) != "2" {
		t.Errorf("after the cancel: %v (Codex-Seq %q), want 499 cancelled with Codex-Seq 2", e, errMsg.Header.Get(schemas.HeaderSeq))
	}
	sentinel, err := sub.NextMsg(waitTimeout)
	if err != nil || len(sentinel.Data) != 0 {
		t.Fatalf("want the sentinel last, got %v %v", sentinel, err)
	}
	waitFor(t, "the slot to be free", func() bool { st := svc.Stats(); return st.Inflight == 0 && st.Cancelled == 1 })
}

func TestCancelUnknownAndHostileIDsIgnored(t *testing.T) {
	ns := startServer(t)
	gen := newHanging()
	svc := newService(t, ns, Config{}, gen)
	nc := connect(t, ns)
	done := goRequest(nc, goodRequest, nats.Header{schemas.HeaderRequestID: {"keep-running"}})
	<-gen.started
	for _, id := range []string{"", "someone-else", strings.Repeat("k", 10000), "keep-running-not"} {
		if err := nc.Publish(schemas.DefaultCancelSubject, []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// A request made after the cancels is served, so the cancel messages were handled.
	nc2 := connect(t, ns)
	if err := nc2.Publish(schemas.DefaultCancelSubject, []byte("keep-running")); err != nil {
		t.Fatal(err)
	}
	if cause := gen.waitEnded(t, time.Second); cause != errCancelled {
		t.Errorf("cause %v, want errCancelled", cause)
	}
	if st := svc.Stats(); st.Cancelled != 1 {
		t.Errorf("cancelled %d, want 1: only the exact id stops a generation", st.Cancelled)
	}
	recv(t, done)
}

// TestClientCancelsWhenItsContextEnds: the Go client publishes the request id on codex.cancel
// when its context ends, one-shot and streamed, and the worker frees the slot.
func TestClientCancelsWhenItsContextEnds(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "generate", true: "stream"}[stream], func(t *testing.T) {
			ns := startServer(t)
			gen := newHanging()
			svc := newService(t, ns, Config{}, gen)
			c := client.New(connect(t, ns), client.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				var err error
				if stream {
					_, err = c.Stream(ctx, []byte(goodRequest), nil, func([]byte) error { return nil })
				} else {
					_, err = c.Generate(ctx, []byte(goodRequest), nil)
				}
				errc <- err
			}()
			<-gen.started
			cancel()
			if cause := gen.waitEnded(t, time.Second); cause != errCancelled {
				t.Errorf("cause %v, want errCancelled", cause)
			}
			if err := <-errc; err != context.Canceled {
				t.Errorf("client returned %v, want context.Canceled", err)
			}
			waitFor(t, "the slot to be free", func() bool { return svc.Stats().Inflight == 0 })
		})
	}
}

func TestCancelJobStoresCancelled(t *testing.T) {
	ns := startJetStream(t)
	gen := newHanging()
	newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, gen)
	c := jobClient(t, ns)
	submit(t, c, goodRequest, client.SubmitOptions{ID: "job-to-cancel"})
	<-gen.started
	nc := connect(t, ns)
	if err := nc.Publish(schemas.DefaultCancelSubject, []byte("job-to-cancel")); err != nil {
		t.Fatal(err)
	}
	_, err := waitResult(t, c, "job-to-cancel")
	if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodeCancelled {
		t.Errorf("result of a cancelled job: %v, want 499 cancelled (final, not retried)", err)
	}
}

// TestCancelBeforeStart: a cancel that arrives while nothing runs the request (it is being handed
// back, or its client gave up before it started) stops it as soon as it starts.
func TestCancelBeforeStart(t *testing.T) {
	ns := startServer(t)
	gen := newHanging()
	svc := newService(t, ns, Config{}, gen)
	nc := connect(t, ns)
	if err := nc.Publish(schemas.DefaultCancelSubject, []byte("early-bird")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cancel to reach the worker", func() bool {
		svc.running.mu.Lock()
		defer svc.running.mu.Unlock()
		_, ok := svc.running.recent["early-bird"]
		return ok
	})
	done := goRequest(nc, goodRequest, nats.Header{schemas.HeaderRequestID: {"early-bird"}})
	<-gen.started
	if cause := gen.waitEnded(t, time.Second); cause != errCancelled {
		t.Errorf("cause %v, want errCancelled", cause)
	}
	if e := errorOf(t, recv(t, done)); e.Code != schemas.CodeCancelled {
		t.Errorf("reply %v, want 499 cancelled", e)
	}
}
