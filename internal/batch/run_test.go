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
	"github.com/codexpool/codexpool/queue/embedded"
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
// every job gets one line in the matching format, a line too large to submit is that line's
// failure (not the run's), the summary counts them, a rerun submits only the failed lines again
// (none with KeepFailed), and no goroutine of Run outlives it.
func TestRun(t *testing.T) {
	ns, err := embedded.Start("127.0.0.1:0", nil, embedded.WithJetStream(t.TempDir()))
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
	tooLarge := `{"input":"` + strings.Repeat("x", int(nc.MaxPayload())) + `"}`
	write(t, in, `{"input":"a"}`+"\n"+`{"input":"b"}`+"\n"+`{"input":"c","model":"fail"}`+"\n"+
		`{"custom_id":"x","body":{"input":"d"}}`+"\n"+tooLarge+"\n")
	run := func(keepFailed bool) (Summary, string) {
		t.Helper()
		var progress bytes.Buffer
		b, err := Load(Config{In: in, Poll: 200 * time.Millisecond, Timeout: time.Minute, Stderr: &progress, KeepFailed: keepFailed})
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
	readOut := func() string {
		t.Helper()
		out, err := os.ReadFile(filepath.Join(dir, "in.out.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	sum, progress := run(false)
	if sum.Total != 5 || sum.OK != 3 || sum.Failed != 2 || sum.Already != 0 || sum.AllOK() {
		t.Errorf("got %+v, want 5 jobs: 3 ok, 2 failed, not all ok", sum)
	}
	if !strings.HasPrefix(progress, "batch: 5/5 done, 2 failed, ") || !strings.HasSuffix(progress, " left\n") {
		t.Errorf("progress %q, want the final line batch: 5/5 done, 2 failed, ... left", progress)
	}
	got := readOut()
	for _, want := range []string{`"line":1,"response":{"id":"resp_1","output_text":"hi"},"status":200`, `"status":502`,
		`"custom_id":"x","error":null`, `"code":"request_too_large"`, `"line":5,"status":413`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %s:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 5 {
		t.Errorf("%d output lines, want 5", n)
	}
	calls := gen.calls.Load()
	// A rerun submits the two failed lines again (the "fail" model generates twice: MaxAttempts).
	if sum, _ = run(false); sum.Already != 3 || sum.OK != 0 || sum.Failed != 2 || gen.calls.Load() != calls+2 {
		t.Errorf("rerun: %+v and %d new generations, want 3 from the earlier run, the 2 failures again and 2", sum, gen.calls.Load()-calls)
	}
	if n := strings.Count(readOut(), "\n"); n != 7 {
		t.Errorf("%d output lines after the rerun, want 7 (5, and the 2 failed lines again)", n)
	}
	calls = gen.calls.Load()
	if sum, _ = run(true); sum.Already != 5 || sum.AlreadyFailed != 2 || sum.OK+sum.Failed != 0 || gen.calls.Load() != calls || sum.AllOK() {
		t.Errorf("rerun keeping failures: %+v and %d new generations, want all 5 from earlier runs (2 failed) and none", sum, gen.calls.Load()-calls)
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
