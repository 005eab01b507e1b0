package queue

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// TestJobResultWriteOutageRetriedInPlace: the results bucket goes away for 4 s while a job's
// generation finishes (as when the bucket's stream leader dies and the cluster elects another,
// which took ~4 s in scripts/chaos): the write is tried again in place until the bucket is back,
// so the answer in hand is stored and the job is generated once, not handed back to run again.
func TestJobResultWriteOutageRetriedInPlace(t *testing.T) {
	ns := startJetStream(t)
	cfg := fastJobs()
	cfg.AckWait = 3 * time.Second // kept alive while the write waits
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	deleted := make(chan struct{})
	gen := &scripted{fn: func(ctx context.Context, r *schemas.Request, call int, emit func([]byte) error) ([]byte, error) {
		if call == 1 {
			if err := js.DeleteKeyValue(ctx, schemas.DefaultResultsBucket); err != nil {
				return nil, err
			}
			close(deleted)
		}
		return instant(ctx, r, emit)
	}}
	svc := newService(t, ns, Config{Jobs: openJobs(t, ns, cfg)}, gen)
	c := jobClient(t, ns)
	submit(t, c, goodRequest, client.SubmitOptions{ID: "outage"})
	select {
	case <-deleted:
	case <-time.After(waitTimeout):
		t.Fatal("the job did not run")
	}
	<-time.After(4 * time.Second) // the outage: longer than three tries (each ~0.5 s) and their pauses
	openJobs(t, ns, cfg)          // the bucket is back
	if _, err := waitResult(t, c, "outage"); err != nil {
		t.Fatal(err)
	}
	if n := gen.count("outage"); n != 1 {
		t.Errorf("generated %d times, want 1: the stored answer was thrown away", n)
	}
	// The result is stored before the job is acked: wait for the ack.
	waitFor(t, "the job's ack", func() bool { return svc.Stats().Jobs.Acked > 0 })
	if st := svc.Stats().Jobs; st.Retried != 0 || st.Acked != 1 {
		t.Errorf("retried %d, acked %d; want 0 and 1", st.Retried, st.Acked)
	}
}
