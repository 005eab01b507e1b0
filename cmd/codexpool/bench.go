package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// benchConfig is one bench invocation: the origin, the pool and the load. Each (mode,
// concurrency) pair is a scenario run with fresh worker processes, so gate state never leaks
// from one scenario to the next.
type benchConfig struct {
	natsURL      string
	workers      int
	workerCounts []int // a sweep over worker counts (--workers 1,2,4)
	requests     int   // per scenario; 0 = the scenario's concurrency (one burst)
	concurrency  []int
	modes        []string
	fixedSpacing time.Duration
	reuse        bool
	maxInflight  int
	timeout      time.Duration
	stream       bool
	sim          codextest.Options
	jsonOut      bool
	plot         string
	quiet        bool          // no progress bar
	baseline     bool          // also measure a bare NATS echo at each concurrency
	duration     time.Duration // > 0: open-loop load at rate for this long instead of closed-loop
	rate         float64
	schedule     []limitChange // origin upgrade-limit changes during the load
	timeline     bool          // print the per-second timeline
	minSpeedup   float64
}

// scenarioResult is one row of the result table (and one object of --json).
type scenarioResult struct {
	Mode          string         `json:"mode"`
	Workers       int            `json:"workers"`
	Concurrency   int            `json:"concurrency"`
	Requests      int            `json:"requests"`
	OK            int            `json:"ok"`
	Failed        int            `json:"failed"`
	WallSeconds   float64        `json:"wall_s"`
	ReqPerSec     float64        `json:"req_per_s"`
	P50ms         float64        `json:"p50_ms"`
	P95ms         float64        `json:"p95_ms"`
	P99ms         float64        `json:"p99_ms"`
	Upgrades      int64          `json:"upgrades_accepted"`
	Rejected      int64          `json:"upgrades_rejected"`
	Rejected403   int64          `json:"rejected_403"`
	Reused        int64          `json:"sockets_reused"`
	GateWaitMS    int64          `json:"gate_wait_ms"`
	PeakRSSMB     float64        `json:"peak_worker_rss_mb"`
	RSSPerFlightK float64        `json:"rss_per_inflight_kb"`
	Errors        map[string]int `json:"errors,omitempty"`
	Rate          float64        `json:"rate,omitempty"` // open-loop arrivals per second (--duration runs)
	Timeline      []tick         `json:"timeline,omitempty"`
}

func runBenchConfig(ctx context.Context, e env, cfg benchConfig) ([]scenarioResult, error) {
	srv, err := codextest.Listen("127.0.0.1:0", cfg.sim)
	if err != nil {
		return nil, fmt.Errorf("bench: start simulator: %w", err)
	}
	defer srv.Close()

	url := cfg.natsURL
	if url == "" {
		ns, err := queue.StartEmbedded("127.0.0.1:0", nil)
		if err != nil {
			return nil, fmt.Errorf("bench: start embedded NATS: %w", err)
		}
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		url = ns.ClientURL()
	}
	nc, err := nats.Connect(url, nats.Name("codexpool bench"))
	if err != nil {
		return nil, fmt.Errorf("bench: connect to NATS at %s: %w", url, err)
	}
	defer nc.Close()

	var results []scenarioResult
	workers := cfg.workerCounts
	if len(workers) == 0 {
		workers = []int{cfg.workers}
	}
	for _, mode := range cfg.modes {
		for _, n := range workers {
			for _, c := range cfg.concurrency {
				if err := ctx.Err(); err != nil {
					return results, err
				}
				sc := cfg
				sc.workers = n
				r, err := runScenario(ctx, e, sc, srv, nc, url, mode, c)
				if err != nil {
					return results, err
				}
				results = append(results, r)
			}
		}
	}
	if cfg.baseline {
		for _, c := range cfg.concurrency {
			r, err := runEcho(ctx, e, cfg, nc, c)
			if err != nil {
				return results, err
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// workerEnv returns the environment of a bench worker process for mode.
func workerEnv(cfg benchConfig, natsURL, subject, originURL, mode string, i int) []string {
	env := os.Environ()
	gateMode, floor := mode, 0
	if mode == "fixed" {
		floor = int(cfg.fixedSpacing / time.Millisecond)
	}
	token := cfg.sim.Token
	if token == "" {
		token = "sim-token"
	}
	return append(env,
		"CODEXPOOL_NATS_URL="+natsURL,
		"CODEXPOOL_SUBJECT="+subject,
		"CODEXPOOL_QUEUE_GROUP=codexpool-bench",
		"CODEXPOOL_WORKER_ID="+fmt.Sprintf("bench-%s-%d", mode, i+1),
		"CODEXPOOL_CODEX_URL="+originURL,
		"CODEXPOOL_CODEX_TOKEN="+token,
		"CODEXPOOL_GATE="+gateMode,
		"CODEXPOOL_WS_CONNECT_SPACING_MS="+strconv.Itoa(floor),
		"CODEXPOOL_WS_REUSE="+strconv.FormatBool(cfg.reuse),
		"CODEXPOOL_MAX_INFLIGHT="+strconv.Itoa(cfg.maxInflight),
		"CODEXPOOL_LOG_LEVEL=warn",
		"CODEXPOOL_LOG_FORMAT=json",
	)
}

type workerProc struct {
	cmd    *exec.Cmd
	stderr *tailBuffer
	done   chan error
}

func startWorkers(ctx context.Context, cfg benchConfig, natsURL, subject, originURL, mode string) ([]*workerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: find own executable: %w", err)
	}
	var procs []*workerProc
	for i := range cfg.workers {
		cmd := exec.Command(exe, "worker")
		cmd.Env = workerEnv(cfg, natsURL, subject, originURL, mode, i)
		tb := &tailBuffer{max: 8 << 10}
		cmd.Stderr = tb
		cmd.Stdout = tb
		if err := cmd.Start(); err != nil {
			stopWorkers(procs)
			return nil, fmt.Errorf("bench: start worker: %w", err)
		}
		p := &workerProc{cmd: cmd, stderr: tb, done: make(chan error, 1)}
		go func() { p.done <- cmd.Wait() }()
		procs = append(procs, p)
	}
	return procs, nil
}

// stopWorkers sends SIGTERM, waits up to 30 s, then kills.
func stopWorkers(procs []*workerProc) {
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// waitServing waits until n workers serve subject, found through micro discovery ($SRV.INFO).
func waitServing(ctx context.Context, nc *nats.Conn, subject string, n int, procs []*workerProc) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got := countServing(nc, subject); got >= n {
			return nil
		}
		for _, p := range procs {
			select {
			case err := <-p.done:
				return fmt.Errorf("bench: a worker exited before serving (%v):\n%s", err, p.stderr.String())
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: workers not serving %s after 30s", subject)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// countServing asks every codexpool service for its info and counts those serving subject.
func countServing(nc *nats.Conn, subject string) int {
	n := 0
	for _, raw := range gather(nc, "$SRV.INFO.codexpool", 150*time.Millisecond) {
		var info struct {
			Endpoints []struct {
				Subject string `json:"subject"`
			} `json:"endpoints"`
		}
		if json.Unmarshal(raw, &info) == nil {
			for _, ep := range info.Endpoints {
				if ep.Subject == subject {
					n++
				}
			}
		}
	}
	return n
}

// gather publishes an empty request and collects replies for wait.
func gather(nc *nats.Conn, subject string, wait time.Duration) [][]byte {
	inbox := nats.NewInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil
	}
	var out [][]byte
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case m := <-ch:
			out = append(out, m.Data)
		case <-timer.C:
			return out
		}
	}
}

// gateWait sums the time the workers serving subject spent waiting in their gates.
func gateWait(nc *nats.Conn, subject string) time.Duration {
	var total time.Duration
	for _, raw := range gather(nc, "$SRV.STATS.codexpool", 200*time.Millisecond) {
		var st struct {
			Endpoints []struct {
				Subject string          `json:"subject"`
				Data    json.RawMessage `json:"data"`
			} `json:"endpoints"`
		}
		if json.Unmarshal(raw, &st) != nil {
			continue
		}
		for _, ep := range st.Endpoints {
			if ep.Subject != subject {
				continue
			}
			var d struct {
				Gate struct {
					WaitedMS int64 `json:"waited_ms"`
				} `json:"gate"`
			}
			if json.Unmarshal(ep.Data, &d) == nil {
				total += time.Duration(d.Gate.WaitedMS) * time.Millisecond
			}
		}
	}
	return total
}

func runScenario(ctx context.Context, e env, cfg benchConfig, srv *codextest.Server, nc *nats.Conn, natsURL, mode string, conc int) (scenarioResult, error) {
	res := scenarioResult{Mode: mode, Workers: cfg.workers, Concurrency: conc}
	total := cfg.requests
	if total <= 0 {
		total = conc
	}
	if cfg.duration > 0 {
		total = int(cfg.rate * cfg.duration.Seconds())
	}
	res.Requests = total
	subject := "codexpool.bench." + strings.ToLower(nuid.Next())
	procs, err := startWorkers(ctx, cfg, natsURL, subject, srv.URL, mode)
	if err != nil {
		return res, err
	}
	defer stopWorkers(procs)
	if err := waitServing(ctx, nc, subject, cfg.workers, procs); err != nil {
		return res, err
	}
	srv.ResetStats()

	prog := newProgress(e.stderr, cfg.quiet, total, fmt.Sprintf("%-9s c=%-4d", mode, conc))
	rss := newRSSSampler(procs)
	client := queue.NewClient(nc, queue.ClientOptions{Subject: subject, RetryBusy: 10})
	words := cfg.sim.Words
	if words == 0 {
		words = 8
	}
	one := func(ctx context.Context, i int) error {
		prompt := fmt.Sprintf("bench request %d of scenario %s/%d", i, mode, conc)
		return benchOne(ctx, client, prompt, words, cfg.stream, cfg.timeout)
	}
	tl := startTimeline(srv, cfg.schedule)
	var ld load
	if cfg.duration > 0 {
		ld = driveOpen(ctx, cfg.rate, total, prog, one)
	} else {
		ld = drive(ctx, total, conc, prog, one)
	}
	res.Timeline = tl.stop()
	ld.fill(&res)
	peak, base := rss.stop()
	if cfg.duration > 0 {
		res.Concurrency = 0
		res.Rate = cfg.rate
	}

	st := srv.Stats()
	res.Upgrades, res.Rejected, res.Rejected403, res.Reused = st.UpgradesAccepted, st.UpgradesRejected, st.Rejected403, st.ReusedResponses
	res.GateWaitMS = gateWait(nc, subject).Milliseconds()
	res.PeakRSSMB = float64(peak) / (1 << 20)
	if conc > 0 && peak > base {
		res.RSSPerFlightK = float64(peak-base) / 1024 / float64(min(conc, total))
	}
	return res, ctx.Err()
}

// load is what drive measured.
type load struct {
	ok, failed int
	errors     map[string]int
	latencies  []time.Duration // of the successful requests, sorted
	wall       time.Duration
}

// drive runs total calls of fn, conc at a time, and measures them.
func drive(ctx context.Context, total, conc int, prog *progress, fn func(ctx context.Context, i int) error) load {
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		ld   = load{errors: map[string]int{}, latencies: make([]time.Duration, 0, total)}
	)
	start := time.Now()
	for range min(conc, total) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := fn(ctx, i)
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					ld.failed++
					ld.errors[errorKey(err)]++
				} else {
					ld.ok++
					ld.latencies = append(ld.latencies, d)
				}
				mu.Unlock()
				prog.add()
			}
		}()
	}
	wg.Wait()
	ld.wall = time.Since(start)
	prog.finish()
	slices.Sort(ld.latencies)
	return ld
}

// fill copies the measurements into a result row.
func (ld load) fill(r *scenarioResult) {
	r.OK, r.Failed = ld.ok, ld.failed
	r.WallSeconds = ld.wall.Seconds()
	r.ReqPerSec = float64(ld.ok) / ld.wall.Seconds()
	r.P50ms, r.P95ms, r.P99ms = pct(ld.latencies, 50), pct(ld.latencies, 95), pct(ld.latencies, 99)
	if len(ld.errors) > 0 {
		r.Errors = ld.errors
	}
}

// runEcho measures a bare NATS request-reply echo at the same load: the ceiling any NATS
// worker pool can reach on this machine.
func runEcho(ctx context.Context, e env, cfg benchConfig, nc *nats.Conn, conc int) (scenarioResult, error) {
	res := scenarioResult{Mode: "nats-echo", Workers: 1, Concurrency: conc}
	total := cfg.requests
	if total <= 0 {
		total = conc
	}
	res.Requests = total
	subject := "codexpool.bench.echo." + strings.ToLower(nuid.Next())
	sub, err := nc.QueueSubscribe(subject, "echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		return res, fmt.Errorf("bench: echo responder: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		return res, err
	}
	body, _ := json.Marshal(map[string]any{"input": "echo"})
	prog := newProgress(e.stderr, cfg.quiet, total, fmt.Sprintf("%-9s c=%-4d", res.Mode, conc))
	ld := drive(ctx, total, conc, prog, func(ctx context.Context, i int) error {
		ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
		_, err := nc.RequestWithContext(ctx, subject, body)
		return err
	})
	ld.fill(&res)
	return res, ctx.Err()
}

// benchOne sends one request and checks the answer is the simulator's answer to the prompt.
func benchOne(ctx context.Context, client *queue.Client, prompt string, words int, stream bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"input": prompt, "stream": stream})
	want := codextest.Answer(prompt, words)
	if stream {
		var text strings.Builder
		_, err := client.Stream(ctx, body, nil, func(ev []byte) error {
			var d struct {
				Type  string `json:"type"`
				Delta string `json:"delta"`
			}
			if err := json.Unmarshal(ev, &d); err != nil {
				return err
			}
			if d.Type == "response.output_text.delta" {
				text.WriteString(d.Delta)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if text.String() != want {
			return fmt.Errorf("wrong answer: got %q, want %q", text.String(), want)
		}
		return nil
	}
	reply, err := client.Generate(ctx, body, nil)
	if err != nil {
		return err
	}
	if reply.OutputText != want {
		return fmt.Errorf("wrong answer: got %q, want %q", reply.OutputText, want)
	}
	return nil
}

func errorKey(err error) string {
	if se, ok := schemas.AsError(err); ok {
		return fmt.Sprintf("%d %s", se.Status, se.Code)
	}
	switch {
	case strings.Contains(err.Error(), "wrong answer"):
		return "wrong answer"
	case strings.Contains(err.Error(), "deadline"), strings.Contains(err.Error(), "timeout"):
		return "client timeout"
	}
	return "other: " + err.Error()
}

func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

func printResults(w io.Writer, results []scenarioResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tworkers\tconc\tok\tfailed\twall s\treq/s\tp50 ms\tp95 ms\tp99 ms\tupgrades\t403s\treused\tgate wait s\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.2f\t%.1f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t%.1f\t\n",
			r.Mode, r.Workers, r.Concurrency, r.OK, r.Failed, r.WallSeconds, r.ReqPerSec,
			r.P50ms, r.P95ms, r.P99ms, r.Upgrades, r.Rejected403, r.Reused, float64(r.GateWaitMS)/1000)
	}
	tw.Flush()
	for _, r := range results {
		if r.Rate > 0 {
			fmt.Fprintf(w, "  %s: open loop at %.1f req/s\n", r.Mode, r.Rate)
		}
		for k, n := range r.Errors {
			fmt.Fprintf(w, "  %s c=%d: %d × %s\n", r.Mode, r.Concurrency, n, k)
		}
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// rssSampler samples the summed resident memory of the worker processes every 100 ms.
type rssSampler struct {
	stopc chan struct{}
	done  chan struct{}
	base  int64
	peak  atomic.Int64
}

func newRSSSampler(procs []*workerProc) *rssSampler {
	s := &rssSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	sample := func() int64 {
		var sum int64
		for _, p := range procs {
			sum += procRSS(p.cmd.Process.Pid)
		}
		return sum
	}
	s.base = sample()
	s.peak.Store(s.base)
	go func() {
		defer close(s.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-t.C:
				if v := sample(); v > s.peak.Load() {
					s.peak.Store(v)
				}
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() (peak, base int64) {
	close(s.stopc)
	<-s.done
	return s.peak.Load(), s.base
}

// procRSS returns a process's resident set size in bytes (Linux; 0 elsewhere).
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// progress shows a progress bar on a terminal and a line every few seconds elsewhere (CI logs).
type progress struct {
	bar   *progressbar.ProgressBar
	w     io.Writer
	desc  string
	total int
	done  atomic.Int64
	last  atomic.Int64 // unix nanos of the last line printed (non-terminal)
	start time.Time
}

func newProgress(w io.Writer, quiet bool, total int, desc string) *progress {
	p := &progress{w: w, desc: desc, total: total, start: time.Now()}
	if quiet {
		p.w = nil
		return p
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("req"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	p.last.Store(p.start.UnixNano())
	return p
}

func (p *progress) add() {
	n := p.done.Add(1)
	switch {
	case p.bar != nil:
		_ = p.bar.Add(1)
	case p.w != nil:
		now := time.Now().UnixNano()
		if last := p.last.Load(); now-last > int64(3*time.Second) && p.last.CompareAndSwap(last, now) {
			fmt.Fprintf(p.w, "bench: %s %d/%d done (%.0fs)\n", p.desc, n, p.total, time.Since(p.start).Seconds())
		}
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// driveOpen starts total calls of fn at a fixed arrival rate (open loop: arrivals do not wait
// for earlier calls), then waits for all of them.
func driveOpen(ctx context.Context, rate float64, total int, prog *progress, fn func(ctx context.Context, i int) error) load {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
		ld = load{errors: map[string]int{}, latencies: make([]time.Duration, 0, total)}
	)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			err := fn(ctx, i)
			d := time.Since(t0)
			mu.Lock()
			if err != nil {
				ld.failed++
				ld.errors[errorKey(err)]++
			} else {
				ld.ok++
				ld.latencies = append(ld.latencies, d)
			}
			mu.Unlock()
			prog.add()
		}()
	}
	wg.Wait()
	ld.wall = time.Since(start)
	prog.finish()
	slices.Sort(ld.latencies)
	return ld
}

// limitChange changes the origin's upgrade limit at an offset from the start of the load.
type limitChange struct {
	at    time.Duration
	rate  float64
	burst int
}

// parseSchedule parses "20s:50/50,40s:5/5" (offset:rate/burst, burst optional).
func parseSchedule(s string) ([]limitChange, error) {
	var out []limitChange
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		at, lim, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("%q: want OFFSET:RATE[/BURST], e.g. 20s:50/50", part)
		}
		d, err := time.ParseDuration(at)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%q: bad offset %q", part, at)
		}
		rs, bs, _ := strings.Cut(lim, "/")
		r, err := strconv.ParseFloat(rs, 64)
		if err != nil || r < 0 {
			return nil, fmt.Errorf("%q: bad rate %q", part, rs)
		}
		b := 0
		if bs != "" {
			if b, err = strconv.Atoi(bs); err != nil || b < 0 {
				return nil, fmt.Errorf("%q: bad burst %q", part, bs)
			}
		}
		out = append(out, limitChange{at: d, rate: r, burst: b})
	}
	slices.SortFunc(out, func(a, b limitChange) int { return int(a.at - b.at) })
	return out, nil
}

// tick is one second of the origin's view: upgrades accepted and rejected, responses completed.
type tick struct {
	T         int   `json:"t_s"`
	Accepted  int64 `json:"upgrades_accepted"`
	Rejected  int64 `json:"upgrades_rejected"`
	Completed int64 `json:"completed"`
}

// timeline samples the simulator every second and applies the limit schedule.
type timeline struct {
	stopc chan struct{}
	done  chan struct{}
	ticks []tick
}

func startTimeline(srv *codextest.Server, schedule []limitChange) *timeline {
	tl := &timeline{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tl.done)
		start := time.Now()
		last := srv.Stats()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		next := 0
		sec := 1
		for {
			select {
			case <-tl.stopc:
				return
			case <-t.C:
			}
			el := time.Since(start)
			for next < len(schedule) && el >= schedule[next].at {
				srv.SetUpgradeLimit(schedule[next].rate, schedule[next].burst)
				next++
			}
			if el >= time.Duration(sec)*time.Second {
				st := srv.Stats()
				tl.ticks = append(tl.ticks, tick{T: sec, Accepted: st.UpgradesAccepted - last.UpgradesAccepted,
					Rejected: st.UpgradesRejected - last.UpgradesRejected, Completed: st.Completed - last.Completed})
				last = st
				sec++
			}
		}
	}()
	return tl
}

func (tl *timeline) stop() []tick {
	close(tl.stopc)
	<-tl.done
	return tl.ticks
}
