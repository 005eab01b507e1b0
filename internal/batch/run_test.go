package batch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// generator answers every job at once and refuses those whose model is "fail".
type generator struct{ calls atomic.Int64 }

func (g *generator) Generate(_ context.Context, r *schemas.Request, _ func([]byte) error) ([]byte, error) {
	g.calls.Add(1)
	if r.Model == "fail" {
		return nil, schemas.Errorf(schemas.CodeUpstreamError, "refused")
	}
	return []byte(`{"id":"resp_1","output_text":"hi"}`), nil
}

// TestRun runs a file through a real pool (embedded NATS with JetStream, a queue.Service):
// every job gets one line in the matching format, the summary counts them, a rerun submits
// nothing, and no goroutine of Run outlives it.
func TestRun(t *testing.T) {
	ns, err := queue.StartEmbedded("127.0.0.1:0", nil, queue.WithJetStream(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	gen := &generator{}
	wnc := dial(t, ns.ClientURL())
	jobs, err := queue.OpenJobs(context.Background(), wnc, queue.JobsConfig{AckWait: time.Second, MaxAttempts: 2, FetchWait: 200 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := queue.NewService(wnc, queue.Config{WorkerID: "w1", Jobs: jobs}, gen)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Shutdown(context.Background()) }()
	nc := dial(t, ns.ClientURL())
	_, _ = nc.Request("batch.test.warmup", nil, 10*time.Millisecond) // the connection's own reply subscription, before Run

	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	write(t, in, `{"input":"a"}`+"\n"+`{"input":"b"}`+"\n"+`{"input":"c","model":"fail"}`+"\n"+
		`{"custom_id":"x","body":{"input":"d"}}`+"\n")
	run := func() (Summary, string) {
		t.Helper()
		var progress bytes.Buffer
		b, err := Load(Config{In: in, Poll: 200 * time.Millisecond, Timeout: time.Minute, Stderr: &progress})
		if err != nil {
			t.Fatal(err)
		}
		ignore := goleak.IgnoreCurrent()
		sum, err := b.Run(context.Background(), nc, client.Options{})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		// The worker's pull requests come and go; everything else Run started must be gone.
		goleak.VerifyNone(t, ignore, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*pullConsumer).fetch.func1"))
		return sum, progress.String()
	}
	sum, progress := run()
	if sum.Total != 4 || sum.OK != 3 || sum.Failed != 1 || sum.Already != 0 {
		t.Errorf("got %+v, want 4 jobs: 3 ok, 1 failed", sum)
	}
	if !strings.HasPrefix(progress, "batch: 4/4 done, 1 failed, ") || !strings.HasSuffix(progress, " left\n") {
		t.Errorf("progress %q, want the final line batch: 4/4 done, 1 failed, ... left", progress)
	}
	out, err := os.ReadFile(filepath.Join(dir, "in.out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{`"line":1,"response":{"id":"resp_1","output_text":"hi"},"status":200`, `"status":502`,
		`"custom_id":"x","error":null`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %s:\n%s", want, got)
		}
	}
	calls := gen.calls.Load()
	if sum, _ = run(); sum.Already != 4 || sum.OK+sum.Failed != 0 || gen.calls.Load() != calls {
		t.Errorf("rerun: %+v and %d new generations, want all 4 from the earlier run and none", sum, gen.calls.Load()-calls)
	}
	if n := strings.Count(got, "\n"); n != 4 {
		t.Errorf("%d output lines, want 4", n)
	}
}

func dial(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
