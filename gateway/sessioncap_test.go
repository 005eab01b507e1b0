package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// capWorker starts worker id, owning at most one session, on its own simulator sim.
func capWorker(t *testing.T, ns *server.Server, id string, sim *codextest.Server) *queue.Service {
	t.Helper()
	nc, err := queue.Connect(ctxT(t, waitTimeout), ns.ClientURL(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w, err := worker.New(worker.Config{ID: id, URL: sim.URL, Token: simToken, MaxSessions: 1}, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	// A high hop limit makes "every hand-back landed on the full worker again" (p = 2^-30)
	// impossible in practice.
	svc, err := queue.NewService(nc, queue.Config{WorkerID: id, MaxHops: 30}, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = svc.Shutdown(sctx)
	})
	return svc
}

type turnResult struct {
	reply *client.Reply
	err   error
}

// firstTurn sends the first turn of session sid through c in the background.
func firstTurn(ctx context.Context, c *client.Client, sid string) <-chan turnResult {
	ch := make(chan turnResult, 1)
	go func() {
		r, err := c.Generate(ctx, []byte(`{"input":"turn of `+sid+`"}`), nats.Header{schemas.HeaderSessionID: {sid}})
		ch <- turnResult{r, err}
	}()
	return ch
}

// TestNewSessionOnFullWorkerHandedBack: a new session reaching a worker whose sessions are all in
// a turn (max_sessions 1, its one turn held at the simulator) is handed back to the group and
// served by a worker with room, not answered 429; when no worker has room it is answered 429
// worker_busy with a retry time.
func TestNewSessionOnFullWorkerHandedBack(t *testing.T) {
	ns, err := embedded.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	// Every turn is held at its simulator until the test ends (its context is cancelled).
	simA := codextest.NewServer(codextest.Options{Token: simToken, Words: 2, Latency: time.Minute})
	t.Cleanup(simA.Close)
	simB := codextest.NewServer(codextest.Options{Token: simToken, Words: 2, Latency: time.Minute})
	t.Cleanup(simB.Close)
	svcA := capWorker(t, ns, "A", simA)
	svcB := capWorker(t, ns, "B", simB)

	nc, err := queue.Connect(ctxT(t, waitTimeout), ns.ClientURL(), "client", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := client.New(nc, client.Options{RetryBusy: -1})
	held, stop := context.WithCancel(context.Background())
	defer stop()

	// s1 on A (its own subject): A is full.
	s1 := firstTurn(held, c.OnWorker("A"), "s1")
	testutil.WaitFor(t, waitTimeout, "s1's turn to reach A's origin", func() bool { return simA.Stats().Responses == 1 })

	// s2 sent to A too: A hands it back, and B takes it.
	s2 := firstTurn(held, c.OnWorker("A"), "s2")
	testutil.WaitFor(t, waitTimeout, "s2's turn to reach B's origin", func() bool { return simB.Stats().Responses == 1 })
	select {
	case r := <-s2:
		t.Fatalf("s2 answered while its turn runs on B: %+v, %v; want it served by B", r.reply, r.err)
	default:
	}
	if got := simA.Stats().Responses; got != 1 {
		t.Errorf("A's origin saw %d turns, want 1 (s1 only)", got)
	}
	if st := svcA.Stats(); st.Forwarded == 0 || st.Busy != 0 {
		t.Errorf("A forwarded %d and answered busy %d times, want > 0 and 0", st.Forwarded, st.Busy)
	}

	// s3 while both are full: worker_busy with a retry time, quickly.
	start := time.Now()
	r, err := c.Generate(ctxT(t, waitTimeout), []byte(`{"input":"turn of s3"}`), nats.Header{schemas.HeaderSessionID: {"s3"}})
	var e *schemas.Error
	if !errors.As(err, &e) || e.Code != schemas.CodeWorkerBusy || e.Status != 429 || e.RetryAfter <= 0 {
		t.Fatalf("s3 with both workers full: %+v, %v; want 429 worker_busy with a retry time", r, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the busy answer took %v, want it quick", took)
	}
	if busy := svcA.Stats().Busy + svcB.Stats().Busy; busy != 1 {
		t.Errorf("%d busy answers, want 1 (after the hand-backs)", busy)
	}
	if a, b := simA.Stats().Responses, simB.Stats().Responses; a != 1 || b != 1 {
		t.Errorf("the origins saw %d and %d turns, want 1 and 1 (s3 reached neither)", a, b)
	}
	stop()
	for _, ch := range []<-chan turnResult{s1, s2} {
		if r := <-ch; !errors.Is(r.err, context.Canceled) {
			t.Errorf("a held turn ended with %v, want context.Canceled", r.err)
		}
	}
}
