package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

func TestClientGenerate(t *testing.T) {
	ns := startServer(t)
	gotTimeout := make(chan string, 10)
	newService(t, ns, Config{WorkerID: "w1"}, genFunc(func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
		dl, _ := ctx.Deadline()
		gotTimeout <- time.Until(dl).Round(time.Minute).String()
		return instant(ctx, r, emit)
	}))
	c := client.New(connect(t, ns), client.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := c.Generate(ctx, []byte(goodRequest), nats.Header{schemas.HeaderRequestID: {"rid-c"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestID != "rid-c" || r.Worker != "w1" || r.OutputText != "hi rid-c" || !strings.Contains(string(r.Response), `"resp_1"`) {
		t.Errorf("reply = %+v %s", r, r.Response)
	}
	// The client tells the worker how long it will wait.
	if got := <-gotTimeout; got != "3m0s" {
		t.Errorf("worker's deadline ≈ %s from now, want 3m0s (from the client's context)", got)
	}

	_, err = c.Generate(context.Background(), []byte(`{"input":42}`), nil)
	var e *schemas.Error
	if !errors.As(err, &e) || e.Code != schemas.CodeInvalidRequest || e.Status != 400 {
		t.Errorf("bad request: err = %v, want *schemas.Error 400 invalid_request", err)
	}
}

func TestClientStream(t *testing.T) {
	ns := startServer(t)
	newService(t, ns, Config{WorkerID: "w1"}, genFunc(func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
		if emit == nil {
			return nil, schemas.Errorf(schemas.CodeUpstreamError, "client did not force streaming")
		}
		for _, ev := range []string{
			`{"type":"response.created","response":{"id":"resp_9"}}`,
			`{"type":"response.output_text.delta","delta":"Hel"}`,
			`{"type":"response.output_text.delta","delta":"lo"}`,
			`{"type":"response.completed","response":{"id":"resp_9","output_text":"Hello"}}`,
		} {
			if err := emit([]byte(ev)); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}))
	c := client.New(connect(t, ns), client.Options{})

	var events []string
	r, err := c.Stream(context.Background(), []byte(`{"input":"hi","stream":false}`), nil, func(ev []byte) error {
		events = append(events, string(ev))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 4 || !strings.Contains(events[1], `"Hel"`) || !strings.Contains(events[2], `"lo"`) {
		t.Errorf("events = %q, want the 4 in order", events)
	}
	if r.OutputText != "Hello" || r.Worker != "w1" || r.RequestID == "" || !strings.Contains(string(r.Response), "resp_9") {
		t.Errorf("reply = %+v %s", r, r.Response)
	}

	// An error from fn stops the stream and is returned as is.
	stop := errors.New("enough")
	if _, err := c.Stream(context.Background(), []byte(goodRequest), nil, func([]byte) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("fn error: got %v, want %v", err, stop)
	}
}

func TestClientNoResponders(t *testing.T) {
	ns := startServer(t)
	c := client.New(connect(t, ns), client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	start := time.Now()
	if _, err := c.Generate(ctx, []byte(goodRequest), nil); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("Generate: err = %v, want no responders", err)
	}
	// The no-responders status has an empty payload but a header: it is not the sentinel.
	if _, err := c.Stream(ctx, []byte(goodRequest), nil, func([]byte) error { return nil }); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("Stream: err = %v, want no responders", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("no responders took %v, want it at once", took)
	}
}

func TestClientRetriesBusy(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "generate", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			ns := startServer(t)
			nc := connect(t, ns)
			blk := newBlocker()
			s := newService(t, ns, Config{MaxInflight: 1, MaxHops: 1}, blk)
			held := goRequest(nc, goodRequest, nil)
			blk.waitStarted(t)

			c := client.New(nc, client.Options{RetryBusy: 20})
			done := make(chan error, 1)
			go func() {
				var err error
				if stream {
					_, err = c.Stream(context.Background(), []byte(goodRequest), nil, func([]byte) error { return nil })
				} else {
					_, err = c.Generate(context.Background(), []byte(goodRequest), nil)
				}
				done <- err
			}()
			waitFor(t, "a worker_busy answer", func() bool { return s.Stats().Busy >= 1 })
			close(blk.release) // frees the slot; a retry now gets through
			recv(t, held)
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("after busy and retry: %v", err)
				}
			case <-time.After(waitTimeout):
				t.Fatal("client did not retry")
			}
			if st := s.Stats(); st.Completed != 2 {
				t.Errorf("completed = %d, want 2 (held + retried)", st.Completed)
			}
		})
	}
}
