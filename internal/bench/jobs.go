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

	"github.com/codexpool/codexpool/queue"
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
func runJobsScenario(ctx context.Context, cfg Config, srv *codextest.Server, nc *nats.Conn, natsURL, mode string, conc int) (Result, error) {
	res := Result{Mode: mode + "+jobs", Workers: cfg.Workers, Concurrency: conc, Jobs: &JobsResult{Slots: cfg.Workers * cfg.MaxInflight}}
	total := cfg.Requests
	if total <= 0 {
		total = max(cfg.Rounds, 1) * conc
	}
	res.Requests = total
	tag := strings.ToLower(nuid.Next())
	jobsSubject := "codexpool.bench.jobs." + tag
	stream, bucket := "BENCH_JOBS_"+tag, "BENCH_RESULTS_"+tag
	cfg.WorkerEnv = append(append([]string(nil), cfg.WorkerEnv...),
		"CODEXPOOL_JOBS=on", "CODEXPOOL_JOBS_SUBJECT="+jobsSubject, "CODEXPOOL_JOBS_STREAM="+stream,
		"CODEXPOOL_RESULTS_BUCKET="+bucket, "CODEXPOOL_RESULTS_TTL=1h")
	subject := "codexpool.bench." + tag
	procs, err := startWorkers(ctx, cfg, natsURL, subject, srv.URL, mode)
	if err != nil {
		return res, err
	}
	defer stopWorkers(procs)
	if err := waitServing(ctx, nc, subject, cfg.Workers, procs); err != nil {
		return res, err
	}
	defer cleanupJobs(nc, stream, bucket)
	srv.ResetStats()
	words := cfg.Sim.Words
	if words == 0 {
		words = 8
	}
	prompt := func(i int) string { return fmt.Sprintf("bench job %d of scenario %s/%d", i, mode, conc) }

	cl := client.New(nc, client.Options{JobsSubject: jobsSubject, ResultsBucket: bucket})
	prog := newProgress(cfg.Progress, cfg.Quiet, total, fmt.Sprintf("%-9s c=%-4d", res.Mode, conc))
	ld := newLoad(total)
	var (
		mu       sync.Mutex
		finished = make([]bool, total)
		nDone    atomic.Int64
		allDone  = make(chan struct{})
		submitAt = make([]time.Time, total)
		rssAt    = []float64{}
	)
	record := func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if i < 0 || i >= total || finished[i] {
			return
		}
		finished[i] = true
		ld.mu.Lock()
		if err != nil {
			ld.failed++
			ld.errors[errorKey(err)]++
		} else {
			ld.ok++
			ld.latencies = append(ld.latencies, time.Since(submitAt[i]))
		}
		ld.mu.Unlock()
		prog.Add(err != nil)
		n := int(nDone.Add(1))
		for _, p := range []int{10, 50, 90} {
			if n == total*p/100 && len(rssAt) < 3 {
				var sum int64
				for _, pr := range procs {
					sum += RSS(pr.cmd.Process.Pid)
				}
				rssAt = append(rssAt, float64(sum)/(1<<20))
			}
		}
		if n == total {
			close(allDone)
		}
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		id := m.Header.Get(schemas.HeaderJobID)
		i, err := strconv.Atoi(strings.TrimPrefix(id, "j"))
		if err != nil {
			return
		}
		record(i, checkAnswer(m.Data, codextest.Answer(prompt(i), words)))
	})
	if err != nil {
		return res, fmt.Errorf("bench: subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return res, err
	}
	if err := nc.Flush(); err != nil {
		return res, err
	}

	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sampleJobs(ctx, nc, stream, subject, res.Jobs, stopSampling)
	}()

	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	submitErr := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= total || ctx.Err() != nil {
					return
				}
				body, _ := json.Marshal(map[string]any{"input": prompt(i)})
				mu.Lock()
				submitAt[i] = time.Now()
				mu.Unlock()
				if _, err := cl.Submit(ctx, body, client.SubmitOptions{ID: "j" + strconv.Itoa(i), ReplyTo: inbox}); err != nil {
					submitErr <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(submitErr)
	if err := <-submitErr; err != nil {
		close(stopSampling)
		<-sampled
		return res, fmt.Errorf("bench: submit: %w", err)
	}
	timeout := time.NewTimer(cfg.Timeout + time.Duration(total)*time.Millisecond)
	defer timeout.Stop()
	select {
	case <-allDone:
	case <-timeout.C:
	case <-ctx.Done():
	}
	// Live replies are best effort: take what is missing from the bucket.
	for i := range total {
		mu.Lock()
		f := finished[i]
		mu.Unlock()
		if f {
			continue
		}
		r, err := cl.Result(ctx, "j"+strconv.Itoa(i))
		switch {
		case err == nil:
			record(i, checkAnswer(r.Response, codextest.Answer(prompt(i), words)))
		case err == client.ErrNoResult:
			record(i, fmt.Errorf("no result"))
		default:
			record(i, err)
		}
	}
	ld.done(start, prog)
	close(stopSampling)
	<-sampled
	ld.fill(&res)
	res.Jobs.RSSMB = rssAt
	for _, st := range workerJobStats(ctx, nc, subject) {
		res.Jobs.Redelivered += st.Redelivered
	}
	sst := srv.Stats()
	res.Upgrades, res.Rejected, res.Rejected403, res.Reused = sst.UpgradesAccepted, sst.UpgradesRejected, sst.Rejected403, sst.ReusedResponses
	res.GateWaitMS = gateWait(ctx, nc, subject).Milliseconds()
	return res, ctx.Err()
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
func workerJobStats(ctx context.Context, nc *nats.Conn, subject string) []queue.JobStats {
	stats, _ := client.Stats(ctx, nc, 40*time.Millisecond)
	var out []queue.JobStats
	for _, st := range stats {
		for _, ep := range st.Endpoints {
			var d struct {
				Jobs *queue.JobStats `json:"jobs"`
			}
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
