package queue

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/schemas"
)

// startJetStream starts an embedded server with JetStream in a temporary store.
func startJetStream(t testing.TB) *server.Server {
	t.Helper()
	ns, err := embedded.Start("127.0.0.1:0", nil, embedded.WithJetStream(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}

// openJobs opens the jobs of cfg on the test server, as a worker does before NewService.
func openJobs(t testing.TB, ns *server.Server, cfg *JobsConfig) *Jobs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	j, err := OpenJobs(ctx, connect(t, ns), *cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// fastJobs is a JobsConfig for tests: short waits, few attempts.
func fastJobs() *JobsConfig {
	return &JobsConfig{AckWait: time.Second, MaxAttempts: 2, FetchWait: 200 * time.Millisecond}
}

// jobClient returns a client on its own connection.
func jobClient(t testing.TB, ns *server.Server) *client.Client {
	t.Helper()
	return client.New(connect(t, ns), client.Options{})
}

// scripted is a Generator whose answer per call is given by fn; it counts calls per request id.
type scripted struct {
	mu    sync.Mutex
	calls map[string]int
	fn    func(ctx context.Context, r *schemas.Request, call int, emit func([]byte) error) ([]byte, error)
}

func (s *scripted) Generate(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
	s.mu.Lock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[r.ID]++
	n := s.calls[r.ID]
	s.mu.Unlock()
	return s.fn(ctx, r, n, emit)
}

func (s *scripted) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[id]
}

func waitResult(t *testing.T, c *client.Client, id string) (*client.Reply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r, err := c.Wait(ctx, id)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no result for job %s within %s", id, waitTimeout)
	}
	return r, err
}

func submit(t *testing.T, c *client.Client, payload string, opts client.SubmitOptions) client.Job {
	t.Helper()
	j, err := c.Submit(context.Background(), []byte(payload), opts)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestJobResultReplyAndAck(t *testing.T) {
	ns := startJetStream(t)
	svc := newService(t, ns, Config{WorkerID: "w1", Jobs: openJobs(t, ns, fastJobs())}, instant)
	c := jobClient(t, ns)
	nc := connect(t, ns)
	replies, err := nc.SubscribeSync("_INBOX.job.replies")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the server has the subscription before another connection's job
		t.Fatal(err)
	}

	j := submit(t, c, goodRequest, client.SubmitOptions{ID: "job-1", ReplyTo: "_INBOX.job.replies", RequestID: "rid-9"})
	r, err := waitResult(t, c, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText != "hi rid-9" {
		t.Errorf("stored result output_text %q, want %q (the body codex.generate would reply)", r.OutputText, "hi rid-9")
	}
	m, err := replies.NextMsg(waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != string(r.Response) || m.Header.Get(schemas.HeaderJobID) != "job-1" || m.Header.Get(schemas.HeaderRequestID) != "rid-9" {
		t.Errorf("Codex-Reply-To got %s %v, want the stored body with Codex-Job-Id job-1, Codex-Request-Id rid-9", m.Data, m.Header)
	}
	waitFor(t, "the ack", func() bool { return svc.Stats().Jobs.Acked == 1 })
	// The stream is a work queue: an acked job is gone.
	js, _ := jetstream.New(nc)
	st, err := js.Stream(context.Background(), schemas.DefaultJobsStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream to be empty", func() bool {
		info, err := st.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
}

func TestJobDuplicateIDRunsOnce(t *testing.T) {
	ns := startJetStream(t)
	gen := &scripted{fn: func(ctx context.Context, r *schemas.Request, _ int, emit func([]byte) error) ([]byte, error) {
		return instant(ctx, r, emit)
	}}
	svc := newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, gen)
	c := jobClient(t, ns)
	first := submit(t, c, goodRequest, client.SubmitOptions{ID: "dup"})
	second := submit(t, c, goodRequest, client.SubmitOptions{ID: "dup"})
	if first.Duplicate || !second.Duplicate {
		t.Errorf("PubAck duplicate flags %v, %v; want false, true", first.Duplicate, second.Duplicate)
	}
	if _, err := waitResult(t, c, "dup"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ack", func() bool { return svc.Stats().Jobs.Acked == 1 })
	if n := gen.count("dup"); n != 1 {
		t.Errorf("generations for a job submitted twice: %d, want 1", n)
	}
}

func TestJobRetriesThenSucceeds(t *testing.T) {
	ns := startJetStream(t)
	gen := &scripted{fn: func(ctx context.Context, r *schemas.Request, call int, emit func([]byte) error) ([]byte, error) {
		if call == 1 {
			e := schemas.Errorf(schemas.CodeUpstreamRateLimited, "slow down")
			e.RetryAfter = 300 * time.Millisecond
			return nil, e
		}
		return instant(ctx, r, emit)
	}}
	svc := newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, gen)
	c := jobClient(t, ns)
	start := time.Now()
	submit(t, c, goodRequest, client.SubmitOptions{ID: "retry-me"})
	if _, err := waitResult(t, c, "retry-me"); err != nil {
		t.Fatalf("after a 429 and a retry: %v, want the success", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("retried after %s, want at least the origin's 300ms retry time", took)
	}
	st := svc.Stats().Jobs
	if gen.count("retry-me") != 2 || st.Retried != 1 || st.Redelivered != 1 {
		t.Errorf("calls %d, retried %d, redelivered %d; want 2, 1, 1", gen.count("retry-me"), st.Retried, st.Redelivered)
	}
}

func TestJobFinalAndExhaustedErrors(t *testing.T) {
	tests := []struct {
		name      string
		code      schemas.Code
		wantCalls int
	}{
		{"401 is final at once", schemas.CodeUpstreamUnauthorized, 1},
		{"503 is retried up to the attempts", schemas.CodeUnavailable, 2},
		{"504 is retried up to the attempts", schemas.CodeUpstreamTimeout, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := startJetStream(t)
			gen := &scripted{fn: func(context.Context, *schemas.Request, int, func([]byte) error) ([]byte, error) {
				return nil, schemas.Errorf(tt.code, "nope")
			}}
			newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, gen)
			c := jobClient(t, ns)
			submit(t, c, goodRequest, client.SubmitOptions{ID: "j"})
			_, err := waitResult(t, c, "j")
			if e, ok := schemas.AsError(err); !ok || e.Code != tt.code {
				t.Fatalf("result: %v, want the %s error stored", err, tt.code)
			}
			if n := gen.count("j"); n != tt.wantCalls {
				t.Errorf("generations: %d, want %d", n, tt.wantCalls)
			}
		})
	}
}

func TestJobInvalidRequestNeverRuns(t *testing.T) {
	ns := startJetStream(t)
	gen := &counted{Generator: instant}
	newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, gen)
	c := jobClient(t, ns)
	submit(t, c, `{"input":""}`, client.SubmitOptions{ID: "bad"})
	_, err := waitResult(t, c, "bad")
	if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodeInvalidRequest || !strings.Contains(e.Message, `"input"`) {
		t.Fatalf("result: %v, want invalid_request naming input", err)
	}
	if gen.calls.Load() != 0 {
		t.Error("an invalid job reached the generator")
	}
}

func TestJobInvalidIDTerminated(t *testing.T) {
	ns := startJetStream(t)
	svc := newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, instant)
	nc := connect(t, ns)
	replies, err := nc.SubscribeSync("_INBOX.bad.id.replies")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the server has the subscription before another connection's job
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	m := &nats.Msg{Subject: "codex.jobs.submit", Data: []byte(goodRequest), Header: nats.Header{
		schemas.HeaderMsgID: {"has spaces/and.dots"}, schemas.HeaderReplyTo: {"_INBOX.bad.id.replies"},
	}}
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got, err := replies.NextMsg(waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if e := errorOf(t, got); e.Code != schemas.CodeInvalidRequest {
		t.Errorf("reply %v, want invalid_request", e)
	}
	waitFor(t, "the termination", func() bool { return svc.Stats().Jobs.Terminated == 1 })
}

func TestJobWithResultIsSkipped(t *testing.T) {
	ns := startJetStream(t)
	gen := &counted{Generator: instant}
	svc := newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, gen)
	nc := connect(t, ns)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(context.Background(), schemas.DefaultResultsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), "done-before", []byte(`{"id":"resp_0","output_text":"old"}`)); err != nil {
		t.Fatal(err)
	}
	submit(t, jobClient(t, ns), goodRequest, client.SubmitOptions{ID: "done-before"})
	waitFor(t, "the skip", func() bool { return svc.Stats().Jobs.Skipped == 1 })
	if gen.calls.Load() != 0 {
		t.Error("a job whose result existed ran again")
	}
}

func TestJobStreamedToReplyTo(t *testing.T) {
	ns := startJetStream(t)
	newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, instant)
	c := jobClient(t, ns)
	nc := connect(t, ns)
	sub, err := nc.SubscribeSync("_INBOX.stream.replies")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the server has the subscription before another connection's job
		t.Fatal(err)
	}
	submit(t, c, `{"input":"Say hello","stream":true}`, client.SubmitOptions{ID: "s1", ReplyTo: "_INBOX.stream.replies"})
	var seqs []string
	for {
		m, err := sub.NextMsg(waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) == 0 {
			break
		}
		seqs = append(seqs, m.Header.Get(schemas.HeaderSeq))
	}
	if strings.Join(seqs, ",") != "1,2" {
		t.Errorf("events on Codex-Reply-To numbered %v, want 1,2 then the sentinel", seqs)
	}
	r, err := waitResult(t, c, "s1")
	if err != nil || r.OutputText != "hi" {
		t.Errorf("stored result %+v, %v; want the completed response (output_text hi)", r, err)
	}
}

// TestJobsShareSlotsAndHoldNoExtra: a worker pulls only when it has a free slot, so the consumer
// never has more jobs outstanding than the worker runs, and requests see the same slots.
func TestJobsShareSlotsAndHoldNoExtra(t *testing.T) {
	ns := startJetStream(t)
	blk := newBlocker()
	svc := newService(t, ns, Config{MaxInflight: 2, MaxHops: 1, Jobs: openJobs(t, ns, fastJobs())}, blk)
	c := jobClient(t, ns)
	for i := range 10 {
		submit(t, c, goodRequest, client.SubmitOptions{ID: "bp-" + itoa(i)})
	}
	blk.waitStarted(t)
	blk.waitStarted(t)
	nc := connect(t, ns)
	js, _ := jetstream.New(nc)
	cons, err := js.Consumer(context.Background(), schemas.DefaultJobsStream, schemas.JobsConsumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Delivered, not NumPending: the server's count of what is left can lag the last PubAck.
	if info.NumAckPending != 2 || info.Delivered.Consumer != 2 {
		t.Errorf("with 2 slots busy: ack pending %d, delivered %d; want 2 and 2", info.NumAckPending, info.Delivered.Consumer)
	}
	// The two slots are the jobs': a request now finds the worker full.
	m := request(t, nc, DefaultSubject, goodRequest, nil)
	if e := errorOf(t, m); e.Code != schemas.CodeWorkerBusy {
		t.Errorf("request while jobs hold every slot: %v, want worker_busy", e)
	}
	close(blk.release)
	for i := range 10 {
		if _, err := waitResult(t, c, "bp-"+itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := svc.Stats().Jobs; st.Redelivered != 0 || st.Pulled != 10 {
		t.Errorf("pulled %d, redelivered %d; want 10 and 0", st.Pulled, st.Redelivered)
	}
}

// TestJobLongerThanAckWaitNotRedelivered: InProgress keeps a generation of 3x AckWait alive.
func TestJobLongerThanAckWaitNotRedelivered(t *testing.T) {
	ns := startJetStream(t)
	gen := &scripted{fn: func(ctx context.Context, r *schemas.Request, _ int, emit func([]byte) error) ([]byte, error) {
		select {
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return instant(ctx, r, emit)
	}}
	svc := newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, gen) // AckWait 1s
	c := jobClient(t, ns)
	submit(t, c, goodRequest, client.SubmitOptions{ID: "long"})
	if _, err := waitResult(t, c, "long"); err != nil {
		t.Fatal(err)
	}
	if n, st := gen.count("long"), svc.Stats().Jobs; n != 1 || st.Redelivered != 0 {
		t.Errorf("a 3s job with a 1s ack wait ran %d times (redelivered %d), want once", n, st.Redelivered)
	}
}

func TestJobsExistingStreamKeptAndChecked(t *testing.T) {
	ns := startJetStream(t)
	nc := connect(t, ns)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	// A user's stream with other settings is used as it is.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: schemas.DefaultJobsStream, Subjects: []string{"codex.jobs.>"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.MemoryStorage, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, instant)
	st, err := js.Stream(ctx, schemas.DefaultJobsStream)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := st.CachedInfo().Config; cfg.Storage != jetstream.MemoryStorage || cfg.Duplicates != time.Minute {
		t.Errorf("the user's stream was reconfigured: %+v", cfg)
	}
	// A stream that does not capture the submit subject is an error, not something to fix.
	ns2 := startJetStream(t)
	nc2 := connect(t, ns2)
	js2, _ := jetstream.New(nc2)
	if _, err := js2.CreateStream(ctx, jetstream.StreamConfig{Name: schemas.DefaultJobsStream, Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenJobs(ctx, connect(t, ns2), *fastJobs(), nil); err == nil || !strings.Contains(err.Error(), "does not capture") {
		t.Errorf("OpenJobs with a stream that misses codex.jobs.submit: %v, want an error saying so", err)
	}
}

func TestJobShutdownFinishesRunningAndHandsBackNothing(t *testing.T) {
	ns := startJetStream(t)
	blk := newBlocker()
	nc := connect(t, ns)
	svc, err := NewService(nc, Config{MaxInflight: 1, Jobs: openJobs(t, ns, fastJobs())}, blk)
	if err != nil {
		t.Fatal(err)
	}
	c := jobClient(t, ns)
	submit(t, c, goodRequest, client.SubmitOptions{ID: "a"})
	submit(t, c, goodRequest, client.SubmitOptions{ID: "b"})
	blk.waitStarted(t)
	done := make(chan error, 1)
	go func() { done <- svc.Shutdown(context.Background()) }()
	waitFor(t, "shutdown to begin", func() bool { return svc.Stats().Draining })
	close(blk.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := waitResult(t, c, "a"); err != nil {
		t.Fatalf("the running job: %v, want its result before shutdown returned", err)
	}
	// "b" was never pulled: it waits in the stream for the next worker.
	js, _ := jetstream.New(nc)
	cons, _ := js.Consumer(context.Background(), schemas.DefaultJobsStream, schemas.JobsConsumer)
	var info *jetstream.ConsumerInfo
	waitFor(t, "a's ack to reach the server", func() bool {
		info, err = cons.Info(context.Background())
		return err == nil && info.NumAckPending == 0
	})
	if info.NumPending != 1 {
		t.Errorf("after shutdown: pending %d, want 1 (b never pulled)", info.NumPending)
	}
	next := newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, instant)
	if _, err := waitResult(t, c, "b"); err != nil {
		t.Fatal(err)
	}
	_ = next
}

// TestJobStatsInMicroData: the job counters reach `nats micro stats` data.
func TestJobStatsInMicroData(t *testing.T) {
	ns := startJetStream(t)
	newService(t, ns, Config{WorkerID: "w-stats", Jobs: openJobs(t, ns, fastJobs())}, instant)
	c := jobClient(t, ns)
	submit(t, c, goodRequest, client.SubmitOptions{ID: "st"})
	if _, err := waitResult(t, c, "st"); err != nil {
		t.Fatal(err)
	}
	nc := connect(t, ns)
	var acked atomic.Uint64
	waitFor(t, "jobs.acked in the stats data", func() bool {
		stats, _ := client.Stats(context.Background(), nc, 100*time.Millisecond)
		for _, st := range stats {
			var d struct {
				Jobs schemas.JobStats `json:"jobs"`
			}
			if len(st.Endpoints) > 0 && json.Unmarshal(st.Endpoints[0].Data, &d) == nil {
				acked.Store(d.Jobs.Acked)
			}
		}
		return acked.Load() == 1
	})
}

// TestJobsIdleLoopLeavesSlotsToRequests: the pull loop waits for jobs in a slot of its own, but a
// request that finds no other slot free takes it: a worker with one slot and jobs on serves
// requests, and still runs the jobs that come later.
func TestJobsIdleLoopLeavesSlotsToRequests(t *testing.T) {
	ns := startJetStream(t)
	svc := newService(t, ns, Config{MaxInflight: 1, MaxHops: 1, Jobs: openJobs(t, ns, &JobsConfig{FetchWait: 5 * time.Second})}, instant)
	nc := connect(t, ns)
	waitFor(t, "the pull loop to wait for a job", func() bool { return svc.slots.waiting() })
	for i := range 10 {
		m := request(t, nc, DefaultSubject, goodRequest, nil)
		if m.Header.Get(schemas.HeaderServiceErrorCode) != "" {
			t.Fatalf("request %d on an idle worker with one slot: %s, want an answer", i, m.Data)
		}
	}
	c := jobClient(t, ns)
	submit(t, c, goodRequest, client.SubmitOptions{ID: "after-requests"})
	// The job is pulled once the fetch pending since before the requests expires (FetchWait, 5 s)
	// and the next one asks: about 5 s here, and more than twice that on a loaded 2-core CI
	// machine (once more than 10 s), so this wait allows 30 s rather than waitTimeout.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Wait(ctx, "after-requests"); err != nil {
		t.Fatalf("the job after the requests: %v", err)
	}
}

func TestEmbeddedStoreNotShared(t *testing.T) {
	dir := t.TempDir()
	ns, err := embedded.Start("127.0.0.1:0", nil, embedded.WithJetStream(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := embedded.Start("127.0.0.1:0", nil, embedded.WithJetStream(dir)); !errors.Is(err, embedded.ErrStoreInUse) {
		t.Errorf("a second server on the same store: %v, want embedded.ErrStoreInUse", err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	testutil.WaitFor(t, waitTimeout, "the store to be free after shutdown", func() bool {
		again, err := embedded.Start("127.0.0.1:0", nil, embedded.WithJetStream(dir))
		if err != nil {
			return false
		}
		again.Shutdown()
		again.WaitForShutdown()
		return true
	})
}

// TestJobWithResultAnswersAStreamListener: a streamed job whose result exists ends its listener's
// stream with a response.completed carrying the stored reply, then the sentinel.
func TestJobWithResultAnswersAStreamListener(t *testing.T) {
	ns := startJetStream(t)
	newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, &counted{Generator: instant})
	nc := connect(t, ns)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(context.Background(), schemas.DefaultResultsBucket)
	if err != nil {
		t.Fatal(err)
	}
	stored := `{"id":"resp_0","output_text":"from before"}`
	if _, err := kv.Put(context.Background(), "done-stream", []byte(stored)); err != nil {
		t.Fatal(err)
	}
	sub, err := nc.SubscribeSync("_INBOX.stored.replies")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the server has the subscription before another connection's job
		t.Fatal(err)
	}
	submit(t, jobClient(t, ns), `{"input":"x","stream":true}`, client.SubmitOptions{ID: "done-stream", ReplyTo: "_INBOX.stored.replies"})
	first, err := sub.NextMsg(waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if raw, ok := schemas.CompletedResponse(first.Data); !ok || string(raw) != stored || first.Header.Get(schemas.HeaderSeq) != "1" {
		t.Errorf("first message %s (seq %q), want response.completed with the stored reply", first.Data, first.Header.Get(schemas.HeaderSeq))
	}
	if last, err := sub.NextMsg(waitTimeout); err != nil || len(last.Data) != 0 {
		t.Errorf("then %v %v, want the sentinel", last, err)
	}
}
