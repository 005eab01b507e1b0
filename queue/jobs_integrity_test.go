package queue

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// TestJobResultWriteRefusedEndsBounded: a results bucket that refuses every write (values of at
// most 8 bytes) costs at most MaxAttempts generations, and the job ends terminated, not handed
// back forever.
func TestJobResultWriteRefusedEndsBounded(t *testing.T) {
	ns := startJetStream(t)
	nc := connect(t, ns)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: schemas.DefaultResultsBucket, MaxValueSize: 8}); err != nil {
		t.Fatal(err)
	}
	gen := &scripted{fn: func(ctx context.Context, r *schemas.Request, _ int, emit func([]byte) error) ([]byte, error) {
		return instant(ctx, r, emit)
	}}
	cfg := fastJobs() // MaxAttempts 2
	svc := newService(t, ns, Config{Jobs: openJobs(t, ns, cfg)}, gen)
	replies, err := nc.SubscribeSync("_INBOX.unstored")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	submit(t, jobClient(t, ns), goodRequest, client.SubmitOptions{ID: "unstored", ReplyTo: "_INBOX.unstored"})
	waitFor(t, "the job to be terminated", func() bool { return svc.Stats().Jobs.Terminated == 1 })
	if took := time.Since(start); took > 3*cfg.AckWait+3*time.Second {
		t.Errorf("terminated after %s, want within a few seconds", took)
	}
	if n := gen.count("unstored"); n < 1 || n > cfg.MaxAttempts {
		t.Errorf("generations of a job whose result cannot be stored: %d, want 1..%d (MaxAttempts)", n, cfg.MaxAttempts)
	}
	st, err := js.Stream(ctx, schemas.DefaultJobsStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream to be empty (the job is over)", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
	// The answer nobody could store still reaches the listener, once.
	m, err := replies.NextMsg(waitTimeout)
	if err != nil {
		t.Fatalf("the listener got no answer: %v", err)
	}
	if m.Header.Get(schemas.HeaderJobID) != "unstored" {
		t.Errorf("answer headers %v, want Codex-Job-Id unstored", m.Header)
	}
	if got := svc.Stats().Jobs; got.Acked != 0 || got.Terminated != 1 {
		t.Errorf("acked %d, terminated %d; want 0, 1", got.Acked, got.Terminated)
	}
}

// TestJobKeepAliveFollowsConsumerAckWait: the consumer exists with AckWait 1s; a worker
// configured with 30s keeps a 3s job alive at the consumer's wait, so it runs once.
func TestJobKeepAliveFollowsConsumerAckWait(t *testing.T) {
	ns := startJetStream(t)
	openJobs(t, ns, fastJobs()) // creates the consumer with AckWait 1s
	gen := &scripted{fn: func(ctx context.Context, r *schemas.Request, _ int, emit func([]byte) error) ([]byte, error) {
		select {
		case <-time.After(3 * time.Second): // the job's work, not a synchronisation
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return instant(ctx, r, emit)
	}}
	cfg := fastJobs()
	cfg.AckWait = 30 * time.Second
	svc := newService(t, ns, Config{Jobs: openJobs(t, ns, cfg)}, gen)
	c := jobClient(t, ns)
	submit(t, c, goodRequest, client.SubmitOptions{ID: "long30"})
	if _, err := waitResult(t, c, "long30"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ack", func() bool { return svc.Stats().Jobs.Acked >= 1 })
	if n, st := gen.count("long30"), svc.Stats().Jobs; n != 1 || st.Redelivered != 0 {
		t.Errorf("a 3s job, consumer AckWait 1s, worker configured 30s: ran %d times (redelivered %d), want once", n, st.Redelivered)
	}
}

// TestConsumerAckWaitRefresh: a consumer edited after setup (nats consumer edit) reaches the
// keep-alives at the next refresh.
func TestConsumerAckWaitRefresh(t *testing.T) {
	ns := startJetStream(t)
	cfg := fastJobs()
	cfg.AckWait = 30 * time.Second
	j := openJobs(t, ns, cfg)
	if got := j.ackWait.get(); got != 30*time.Second {
		t.Fatalf("ack wait after setup %s, want the consumer's 30s", got)
	}
	js, _ := jetstream.New(connect(t, ns))
	ctx := context.Background()
	want := j.consumer.CachedInfo().Config
	want.AckWait = 2 * time.Second
	if _, err := js.UpdateConsumer(ctx, schemas.DefaultJobsStream, want); err != nil {
		t.Fatal(err)
	}
	j.ackWait.refresh(ctx)
	if got := j.ackWait.get(); got != 30*time.Second {
		t.Errorf("ack wait %s right after setup, want 30s (read at most every %s)", got, ackWaitRefresh)
	}
	j.ackWait.checked = time.Now().Add(-ackWaitRefresh)
	j.ackWait.refresh(ctx)
	if got := j.ackWait.get(); got != 2*time.Second {
		t.Errorf("ack wait after the refresh %s, want the edited 2s", got)
	}
}
