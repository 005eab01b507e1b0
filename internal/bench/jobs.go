package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/codexpool/codexpool/internal/progress"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// JobsResult is what a durable-jobs scenario measures beyond the common figures.
type JobsResult struct {
	// Slots is the pool's in-flight slots (workers x MaxInflight): a worker pulls a job only into
	// a free slot and frees it when the generation ends.
	Slots int `json:"slots"`
	// AckPendingMax is the most jobs the consumer had delivered and not yet acked, over the
	// samples: the jobs running plus those whose results were being written and acks in flight.
	AckPendingMax int `json:"ack_pending_max"`
	// RunningMax is the most jobs the workers reported running (holding a slot) at once.
	RunningMax int `json:"running_max"`
	// Redelivered counts deliveries after the first (worker stats): 0 in a healthy run.
	Redelivered uint64 `json:"redelivered"`
	// RSSMB is the summed worker RSS when 10 %, 50 % and 90 % of the jobs had finished.
	RSSMB []float64 `json:"worker_rss_mb_at_10_50_90"`
	// OfGenerate is this scenario's req/s over the codex.generate scenario's at the same
	// concurrency (0 when there is none).
	OfGenerate float64 `json:"of_generate"`
	Samples    int     `json:"samples"`
}

// runJobsScenario submits the scenario's requests as durable jobs to fresh workers (on a stream,
// consumer and bucket of their own) and waits for every result.
func runJobsScenario(ctx context.Context, cfg Config, rg *rig, mode string, conc int) (Result, error) {
	res := Result{Mode: mode + "+jobs", Workers: cfg.Workers, Concurrency: conc, Jobs: &JobsResult{Slots: cfg.Workers * cfg.MaxInflight}}
	total := scenarioTotal(cfg, conc)
	res.Requests = total
	tag := strings.ToLower(nuid.Next())
	jobsSubject := "codexpool.bench.jobs." + tag
	stream, bucket := "BENCH_JOBS_"+tag, "BENCH_RESULTS_"+tag
	cfg.WorkerEnv = append(append([]string(nil), cfg.WorkerEnv...),
		"CODEXPOOL_JOBS=on", "CODEXPOOL_JOBS_SUBJECT="+jobsSubject, "CODEXPOOL_JOBS_STREAM="+stream,
		"CODEXPOOL_RESULTS_BUCKET="+bucket, "CODEXPOOL_RESULTS_TTL=1h")
	p, err := startPool(ctx, cfg, rg, mode, "codexpool.bench."+tag)
	if err != nil {
		return res, err
	}
	defer p.stop()
	defer cleanupJobs(rg.nc, stream, bucket)

	jr := &jobsRun{
		p: p, total: total, words: simWords(cfg),
		cl:       client.New(rg.nc, client.Options{JobsSubject: jobsSubject, ResultsBucket: bucket}),
		prompt:   func(i int) string { return fmt.Sprintf("bench job %d of scenario %s/%d", i, mode, conc) },
		prog:     newProgress(cfg.Progress, cfg.Quiet, total, fmt.Sprintf("%-9s c=%-4d", res.Mode, conc)),
		ld:       newLoad(total),
		finished: make([]bool, total),
		submitAt: make([]time.Time, total),
		rssAt:    []float64{},
		allDone:  make(chan struct{}),
	}
	if err := jr.measure(ctx, cfg.Timeout, stream, res.Jobs); err != nil {
		return res, err
	}
	jr.ld.fill(&res)
	res.Jobs.RSSMB = jr.rssAt
	for _, st := range workerJobStats(ctx, rg.nc, p.subject) {
		res.Jobs.Redelivered += st.Redelivered
	}
	p.originFigures(ctx, &res)
	return res, ctx.Err()
}

// jobsRun is one durable-jobs scenario's load: which jobs finished, when each was submitted,
// and the workers' memory at 10, 50 and 90 % done.
type jobsRun struct {
	p      *pool
	cl     *client.Client
	total  int
	words  int
	prompt func(i int) string // the prompt of job i
	prog   *progress.Meter
	ld     *load

	mu       sync.Mutex
	finished []bool
	nDone    int
	submitAt []time.Time
	rssAt    []float64
	allDone  chan struct{} // closed when every job finished
}

// measure submits every job, waits for the results (live, then stored) and samples the
// consumer and workers meanwhile into jr.
func (jr *jobsRun) measure(ctx context.Context, timeout time.Duration, stream string, res *JobsResult) error {
	nc := jr.p.rig.nc
	inbox := nc.NewRespInbox()
	sub, err := nc.Subscribe(inbox, jr.onReply)
	if err != nil {
		return fmt.Errorf("bench: subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() { sampleJobs(ctx, nc, stream, jr.p.subject, res, stopSampling) })
	defer sampling.Wait()
	defer close(stopSampling)

	start := time.Now()
	if err := jr.submit(ctx, inbox); err != nil {
		return fmt.Errorf("bench: submit: %w", err)
	}
	t := time.NewTimer(timeout + time.Duration(jr.total)*time.Millisecond)
	defer t.Stop()
	select {
	case <-jr.allDone:
	case <-t.C:
	case <-ctx.Done():
	}
	jr.collectStored(ctx)
	jr.ld.done(start, jr.prog)
	return nil
}

// onReply records a live result on the scenario's inbox.
func (jr *jobsRun) onReply(m *nats.Msg) {
	i, err := strconv.Atoi(strings.TrimPrefix(m.Header.Get(schemas.HeaderJobID), "j"))
	if err != nil {
		return
	}
	jr.record(i, checkAnswer(m.Data, codextest.Answer(jr.prompt(i), jr.words)))
}

// record counts job i's outcome, once.
func (jr *jobsRun) record(i int, err error) {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	if i < 0 || i >= jr.total || jr.finished[i] {
		return
	}
	jr.finished[i] = true
	var d time.Duration
	if err == nil {
		d = time.Since(jr.submitAt[i])
	}
	jr.ld.record(err, d)
	jr.prog.Add(err != nil)
	jr.nDone++
	for _, p := range []int{10, 50, 90} {
		if jr.nDone == jr.total*p/100 && len(jr.rssAt) < 3 {
			var sum int64
			for _, pr := range jr.p.procs {
				sum += RSS(pr.cmd.Process.Pid)
			}
			jr.rssAt = append(jr.rssAt, float64(sum)/(1<<20))
		}
	}
	if jr.nDone == jr.total {
		close(jr.allDone)
	}
}

// submit publishes every job, 8 at a time, with the scenario's inbox for the live results.
func (jr *jobsRun) submit(ctx context.Context, inbox string) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	submitErr := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= jr.total || ctx.Err() != nil {
					return
				}
				body, _ := json.Marshal(map[string]any{"input": jr.prompt(i)})
				jr.mu.Lock()
				jr.submitAt[i] = time.Now()
				jr.mu.Unlock()
				if _, err := jr.cl.Submit(ctx, body, client.SubmitOptions{ID: "j" + strconv.Itoa(i), ReplyTo: inbox}); err != nil {
					submitErr <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(submitErr)
	return <-submitErr
}

// collectStored takes the results whose live reply did not come from the bucket (live
// replies are best effort).
func (jr *jobsRun) collectStored(ctx context.Context) {
	for i := range jr.total {
		jr.mu.Lock()
		f := jr.finished[i]
		jr.mu.Unlock()
		if f {
			continue
		}
		r, err := jr.cl.Result(ctx, "j"+strconv.Itoa(i))
		switch {
		case err == nil:
			jr.record(i, checkAnswer(r.Response, codextest.Answer(jr.prompt(i), jr.words)))
		case err == client.ErrNoResult:
			jr.record(i, fmt.Errorf("no result"))
		default:
			jr.record(i, err)
		}
	}
}

// checkAnswer checks a result body is the simulator's answer.
func checkAnswer(body []byte, want string) error {
	if e, ok := schemas.ResultError(body); ok {
		return e
	}
	var r schemas.Response
	if err := json.Unmarshal(body, &r); err != nil {
		return err
	}
	if r.OutputText != want {
		return fmt.Errorf("wrong answer: got %q, want %q", r.OutputText, want)
	}
	return nil
}

// sampleJobs samples the consumer's unacked jobs and the workers' running jobs every 50 ms.
func sampleJobs(ctx context.Context, nc *nats.Conn, stream, subject string, jr *JobsResult, stop <-chan struct{}) {
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		cons, err := js.Consumer(ctx, stream, schemas.JobsConsumer)
		if err != nil {
			continue
		}
		info, err := cons.Info(ctx)
		if err != nil {
			continue
		}
		running := 0
		for _, st := range workerJobStats(ctx, nc, subject) {
			running += int(st.Running)
		}
		jr.Samples++
		jr.AckPendingMax = max(jr.AckPendingMax, info.NumAckPending)
		jr.RunningMax = max(jr.RunningMax, running)
	}
}

// workerJobStats returns the job counters of the workers serving subject.
func workerJobStats(ctx context.Context, nc *nats.Conn, subject string) []schemas.JobStats {
	stats, _ := client.Stats(ctx, nc, 40*time.Millisecond)
	var out []schemas.JobStats
	for _, st := range stats {
		for _, ep := range st.Endpoints {
			var d schemas.ServiceStats
			if ep.Subject == subject && json.Unmarshal(ep.Data, &d) == nil && d.Jobs != nil {
				out = append(out, *d.Jobs)
			}
		}
	}
	return out
}

// cleanupJobs deletes a scenario's own stream and bucket (they are the bench's, not a user's).
func cleanupJobs(nc *nats.Conn, stream, bucket string) {
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = js.DeleteStream(ctx, stream)
	_ = js.DeleteKeyValue(ctx, bucket)
}
