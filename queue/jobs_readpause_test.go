package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// TestJobUnreadableResultsBucketPausesPulls: a worker whose results bucket cannot be read (here
// deleted under it) backs off instead of spinning. After the first job fails the read, the pull
// loop pulls nothing new for ReadPause (without the pause it takes the next jobs at once, fails each
// read and hands each back, again and again while the bucket is away), requests are still
// served meanwhile, and once the bucket is back every job finishes, each generated once.
func TestJobUnreadableResultsBucketPausesPulls(t *testing.T) {
	ns := startJetStream(t)
	cfg := fastJobs()
	cfg.ReadPause = 5 * time.Second
	var gen scripted
	gen.fn = func(context.Context, *schemas.Request, int, func([]byte) error) ([]byte, error) {
		return []byte(`{"output_text":"done"}`), nil
	}
	svc := newService(t, ns, Config{MaxInflight: 4, Jobs: openJobs(t, ns, cfg)}, &gen)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, schemas.DefaultResultsBucket); err != nil {
		t.Fatal(err)
	}
	c := jobClient(t, ns)
	submit(t, c, goodRequest, client.SubmitOptions{ID: "first"})
	waitFor(t, "the first job to fail its results read", func() bool { return svc.Stats().Jobs.Retried >= 1 })
	for i := range 5 {
		submit(t, c, goodRequest, client.SubmitOptions{ID: fmt.Sprintf("later-%d", i)})
	}
	// A request round trip through this worker: it is served, and gives the pull loop (were it
	// pulling) the time to take the jobs just submitted.
	nc := connect(t, ns)
	if m := request(t, nc, DefaultSubject, goodRequest, nil); m.Header.Get(schemas.HeaderServiceErrorCode) != "" {
		t.Fatalf("request during the pause: %s, want an answer", m.Data)
	}
	// The first job, and at most one more: the one a pull already waiting when the read failed
	// may deliver. Without the pause all six are pulled at once.
	if st := svc.Stats().Jobs; st.Pulled > 2 || st.Retried > 2 {
		t.Fatalf("during the pause: pulled %d, retried %d; want at most 2 (the loop must stop pulling)", st.Pulled, st.Retried)
	}
	openJobs(t, ns, cfg) // the bucket is back
	for _, id := range []string{"first", "later-0", "later-1", "later-2", "later-3", "later-4"} {
		if _, err := waitResult(t, c, id); err != nil {
			t.Fatalf("job %s after the bucket came back: %v", id, err)
		}
		if n := gen.count(id); n != 1 {
			t.Errorf("job %s generated %d times, want 1", id, n)
		}
	}
}

// TestReadPauseDoubles: the pause doubles with each failed read outside a pause, stays while one
// runs, stops at MaxJobsReadPause and starts again from the base after a read that works.
func TestReadPauseDoubles(t *testing.T) {
	p := readPause{base: 10 * time.Second, next: 10 * time.Second}
	if d := p.failed(); d != 10*time.Second {
		t.Fatalf("first pause %s, want 10s", d)
	}
	if d := p.failed(); d > 10*time.Second || d < 9*time.Second {
		t.Fatalf("a read failing during the pause gave %s, want what is left of it (about 10s)", d)
	}
	for range 5 {
		p.until = time.Time{} // the pause is over
		p.failed()
	}
	if p.next != MaxJobsReadPause {
		t.Fatalf("after 6 failed reads the next pause is %s, want the cap %s", p.next, MaxJobsReadPause)
	}
	p.ok()
	p.until = time.Time{}
	if d := p.failed(); d != 10*time.Second {
		t.Fatalf("after a read that worked the pause is %s, want the base 10s", d)
	}
}
