package queue

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// Events, the pull-style stream: idle waits that leave the stream open, the end, and Close
// stopping a request the caller no longer reads.

func TestEventsIdleThenEnd(t *testing.T) {
	ns := startServer(t)
	release := make(chan struct{})
	newService(t, ns, Config{WorkerID: "w1"}, genFunc(func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
		if err := emit([]byte(`{"type":"response.created","response":{"id":"resp_1"}}`)); err != nil {
			return nil, err
		}
		<-release // silent until the test has seen an idle wait
		for _, ev := range []string{`{"type":"response.output_text.delta","delta":"hi"}`,
			`{"type":"response.completed","response":{"id":"resp_1","output_text":"hi"}}`} {
			if err := emit([]byte(ev)); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}))
	c := client.New(connect(t, ns), client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := c.Open(ctx, []byte(goodRequest), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	evs.SetIdle(20 * time.Millisecond)
	if _, err := evs.Next(ctx); err != nil || !evs.Started() {
		t.Fatalf("first event: %v, started %v", err, evs.Started())
	}
	if _, err := evs.Next(ctx); !errors.Is(err, client.ErrIdle) {
		t.Fatalf("Next on a silent origin = %v, want ErrIdle", err)
	}
	close(release)
	evs.SetIdle(0)
	var got []string
	for {
		ev, err := evs.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after an idle wait: %v, want the stream to go on", err)
		}
		got = append(got, string(ev))
	}
	if len(got) != 2 {
		t.Errorf("events after the idle wait %q, want 2", got)
	}
	if r := evs.Reply(); r == nil || r.OutputText != "hi" || r.Worker != "w1" {
		t.Errorf("Reply() = %+v, want output hi from w1", r)
	}
	if _, err := evs.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("Next after the end = %v, want io.EOF again", err)
	}
}

func TestEventsCloseStopsTheRequest(t *testing.T) {
	ns := startServer(t)
	gen := newHanging()
	svc := newService(t, ns, Config{}, gen)
	c := client.New(connect(t, ns), client.Options{})
	evs, err := c.Open(context.Background(), []byte(goodRequest), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evs.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-gen.started
	evs.Close()
	if cause := gen.waitEnded(t, 5*time.Second); cause != errCancelled {
		t.Errorf("cause %v, want errCancelled", cause)
	}
	waitFor(t, "the slot to be free", func() bool { return svc.Stats().Inflight == 0 })
	if evs.Reply() != nil {
		t.Error("a closed stream has a Reply")
	}
}
