package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// Config is one bench run: the origin, the pool and the load. Each (mode, workers, concurrency)
// triple is a scenario run with fresh worker processes, so gate state never leaks from one
// scenario to the next. Zero values are the defaults given per field.
type Config struct {
	Exe          string        // the codexpool binary to start workers with; required
	NATSURL      string        // join this NATS server; default: start an embedded one
	Workers      int           // worker processes per scenario; default 1
	WorkerCounts []int         // a sweep over worker counts (overrides Workers)
	Requests     int           // per scenario; 0 = Rounds x the scenario's concurrency
	Rounds       int           // default 1
	Concurrency  []int         // requests in flight, one scenario each
	Modes        []string      // gate modes, one scenario each
	FixedSpacing time.Duration // the floor of the fixed mode
	Reuse        bool          // CODEXPOOL_WS_REUSE of the workers
	MaxInflight  int           // CODEXPOOL_MAX_INFLIGHT of each worker
	Timeout      time.Duration // per request
	Stream       bool          // streamed replies
	Sim          codextest.Options
	Quiet        bool          // no progress bar
	Progress     io.Writer     // where progress goes (a bar on a terminal, lines otherwise); nil = none
	Baseline     bool          // also measure a bare NATS echo at each concurrency
	Duration     time.Duration // > 0: open-loop load at Rate for this long instead of closed-loop
	Rate         float64
	Schedule     []LimitChange // origin upgrade-limit changes during the load
	// Jobs runs every scenario a second time as a batch of durable jobs (JetStream) beside the
	// codex.generate one: the same requests, the same workers, side by side.
	Jobs bool

	scope string // this scenario's gate scope ("" = the default)
	// WorkerEnv is added to every worker's environment (CODEXPOOL_* settings), after the bench's.
	WorkerEnv []string
	// Scopes runs every scenario once per CODEXPOOL_GATE_SCOPE ("process" or a shared scope; a
	// shared one is made unique per scenario, so gates of different rows never talk), labelled
	// mode/scope. Empty: the workers' default scope, unlabelled.
	Scopes []string
	// GateFlood publishes this many bogus gate-state messages per second (garbage, truncated and
	// valid-looking ones from random ids with extreme values) to each shared scenario's gate
	// subject while its load runs.
	GateFlood int
	// Accounts are the simulator's accounts (Sim.Accounts is set from them); the workers get
	// the first AccountCounts[i] of them (name, token) as CODEXPOOL_ACCOUNTS, one scenario per
	// count. Default counts: all of them. nil = no accounts.
	Accounts      []codextest.Account
	AccountCounts []int
	accountsFile  string // the scenario's CODEXPOOL_ACCOUNTS
	// HostNamespaces are the network namespaces of simulated hosts (RunInHosts): workers are
	// spread over them round-robin, and NATS and the simulator listen on the hub's address.
	// nil = every process on this machine's loopback.
	HostNamespaces []string
	// HostDelay is the simulated hosts' one-way delay, for the results.
	HostDelay time.Duration
}

// Result is one row of the result table (and one object of --json).
type Result struct {
	Mode        string  `json:"mode"`
	Workers     int     `json:"workers"`
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"`
	OK          int     `json:"ok"`
	Failed      int     `json:"failed"`
	WallSeconds float64 `json:"wall_s"`
	ReqPerSec   float64 `json:"req_per_s"`
	P50ms       float64 `json:"p50_ms"`
	P95ms       float64 `json:"p95_ms"`
	P99ms       float64 `json:"p99_ms"`
	Upgrades    int64   `json:"upgrades_accepted"`
	Rejected    int64   `json:"upgrades_rejected"`
	Rejected403 int64   `json:"rejected_403"`
	Reused      int64   `json:"sockets_reused"`
	GateWaitMS  int64   `json:"gate_wait_ms"`
	// PeersDoubted and HoldsContradicted sum what the workers' gates found out about their
	// peers (docs/gate-design.md): an honest fleet has 0 of each.
	PeersDoubted      int64          `json:"gate_peers_doubted,omitempty"`
	HoldsContradicted int64          `json:"gate_holds_contradicted,omitempty"`
	PeakRSSMB         float64        `json:"peak_worker_rss_mb"`
	RSSPerFlightK     float64        `json:"rss_per_inflight_kb"`
	Errors            map[string]int `json:"errors,omitempty"`
	Rate              float64        `json:"rate,omitempty"` // open-loop arrivals per second (--duration runs)
	Accounts          int            `json:"accounts,omitempty"`
	Timeline          []Tick         `json:"timeline,omitempty"`
	Jobs              *JobsResult    `json:"jobs,omitempty"`            // a durable-jobs scenario's own figures
	FloodSent         int64          `json:"gate_flood_sent,omitempty"` // bogus gate messages published during the load
	Hosts             int            `json:"hosts,omitempty"`           // simulated hosts the workers ran on (--hosts)
	HostDelayMS       float64        `json:"host_delay_ms,omitempty"`   // their one-way delay from NATS and the origin
}

// Run runs every scenario of cfg and returns one Result per scenario (and per concurrency for
// the echo baseline), in order. It starts the simulator, NATS (unless cfg.NATSURL) and the
// worker processes itself, and stops them before it returns.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := checkAccounts(cfg); err != nil {
		return nil, err
	}
	if len(cfg.Accounts) > 0 {
		cfg.Sim.Accounts = cfg.Accounts
	}
	rg, err := startRig(cfg)
	if err != nil {
		return nil, err
	}
	defer rg.close()
	dir, err := os.MkdirTemp("", "codexpool-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var results []Result
	for _, sp := range plan(cfg) {
		if err := ctx.Err(); err != nil {
			return results, err
		}
		rs, err := runSpec(ctx, cfg, rg, dir, sp)
		results = append(results, rs...)
		if err != nil {
			return results, err
		}
	}
	if cfg.Baseline {
		for _, c := range cfg.Concurrency {
			r, err := runEcho(ctx, cfg, rg.nc, c)
			if err != nil {
				return results, err
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// spec is one scenario of a run.
type spec struct {
	mode                    string
	workers, accounts, conc int
	scope                   string
}

// plan lists the scenarios of cfg in the order they run: by mode, workers, accounts,
// concurrency, then scope.
func plan(cfg Config) []spec {
	workers := cfg.WorkerCounts
	if len(workers) == 0 {
		workers = []int{cfg.Workers}
	}
	scopes := cfg.Scopes
	if len(scopes) == 0 {
		scopes = []string{""}
	}
	var out []spec
	for _, mode := range cfg.Modes {
		for _, n := range workers {
			for _, k := range accountCounts(cfg) {
				for _, c := range cfg.Concurrency {
					for _, scope := range scopes {
						out = append(out, spec{mode: mode, workers: n, accounts: k, conc: c, scope: scope})
					}
				}
			}
		}
	}
	return out
}

// runSpec runs one scenario, and its durable-jobs twin with cfg.Jobs (closed loop only); it
// returns the rows measured before any error.
func runSpec(ctx context.Context, cfg Config, rg *rig, dir string, sp spec) ([]Result, error) {
	sc := cfg
	sc.Workers, sc.scope = sp.workers, sp.scope
	if sp.accounts > 0 {
		var err error
		if sc.accountsFile, err = writeAccountsFile(dir, cfg.Accounts, sp.accounts); err != nil {
			return nil, err
		}
	}
	r, err := runScenario(ctx, sc, rg, sp.mode, sp.conc)
	r.Accounts = sp.accounts
	if err != nil {
		return nil, err
	}
	if !cfg.Jobs || cfg.Duration != 0 {
		return []Result{r}, nil
	}
	j, err := runJobsScenario(ctx, sc, rg, sp.mode, sp.conc)
	if err != nil {
		return []Result{r}, err
	}
	if r.ReqPerSec > 0 {
		j.Jobs.OfGenerate = j.ReqPerSec / r.ReqPerSec
	}
	return []Result{r, j}, nil
}

// withScope gives the workers cfg.scope as their gate scope (a shared one made unique to this
// row) and returns the row's label and the subject a gate flood goes to ("" for none).
func withScope(cfg Config, mode string) (Config, string, string) {
	if cfg.scope == "" {
		return cfg, mode, ""
	}
	scope, floodSubject := cfg.scope, ""
	if scope != "process" {
		scope += "-" + strings.ToLower(nuid.Next()) // this row's gates only
		floodSubject, _ = queue.GateScopeSubject(scope, worker.AccountIdentity("", simToken(cfg)))
	}
	cfg.WorkerEnv = append(append([]string(nil), cfg.WorkerEnv...), "CODEXPOOL_GATE_SCOPE="+scope)
	return cfg, mode + "/" + cfg.scope, floodSubject
}

func runScenario(ctx context.Context, cfg Config, rg *rig, mode string, conc int) (Result, error) {
	cfg, label, floodSubject := withScope(cfg, mode)
	res := Result{Mode: label, Workers: cfg.Workers, Concurrency: conc, Hosts: len(cfg.HostNamespaces)}
	res.HostDelayMS = float64(cfg.HostDelay.Microseconds()) / 1000
	total := scenarioTotal(cfg, conc)
	if cfg.Duration > 0 {
		total = int(cfg.Rate * cfg.Duration.Seconds())
	}
	res.Requests = total
	p, err := startPool(ctx, cfg, rg, mode, "codexpool.bench."+strings.ToLower(nuid.Next()))
	if err != nil {
		return res, err
	}
	defer p.stop()

	prog := newProgress(cfg.Progress, cfg.Quiet, total, fmt.Sprintf("%-9s c=%-4d", mode, conc))
	rss := newRSSSampler(p.procs)
	cl := client.New(rg.nc, client.Options{Subject: p.subject, RetryBusy: 10})
	words := simWords(cfg)
	one := func(ctx context.Context, i int) error {
		prompt := fmt.Sprintf("bench request %d of scenario %s/%d", i, mode, conc)
		return benchOne(ctx, cl, prompt, words, cfg.Stream, cfg.Timeout)
	}
	tl := startTimeline(rg.srv, cfg.Schedule)
	var fl *flood
	if cfg.GateFlood > 0 && floodSubject != "" {
		fl = startFlood(rg.nc, floodSubject, cfg.GateFlood)
	}
	var ld *load
	if cfg.Duration > 0 {
		ld = driveOpen(ctx, cfg.Rate, total, prog, one)
	} else {
		ld = drive(ctx, total, conc, prog, one)
	}
	res.Timeline = tl.stop()
	if fl != nil {
		res.FloodSent = fl.stop()
	}
	ld.fill(&res)
	peak, base := rss.stop()
	if cfg.Duration > 0 {
		res.Concurrency, res.Rate = 0, cfg.Rate
	}
	p.originFigures(ctx, &res)
	res.PeakRSSMB = float64(peak) / (1 << 20)
	if conc > 0 && peak > base {
		res.RSSPerFlightK = float64(peak-base) / 1024 / float64(min(conc, total))
	}
	return res, ctx.Err()
}

// runEcho measures a bare NATS request-reply echo at the same load: the ceiling any NATS
// worker pool can reach on this machine.
func runEcho(ctx context.Context, cfg Config, nc *nats.Conn, conc int) (Result, error) {
	res := Result{Mode: "nats-echo", Workers: 1, Concurrency: conc}
	total := scenarioTotal(cfg, conc)
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
	prog := newProgress(cfg.Progress, cfg.Quiet, total, fmt.Sprintf("%-9s c=%-4d", res.Mode, conc))
	ld := drive(ctx, total, conc, prog, func(ctx context.Context, i int) error {
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		_, err := nc.RequestWithContext(ctx, subject, body)
		return err
	})
	ld.fill(&res)
	return res, ctx.Err()
}

// benchOne sends one request and checks the answer is the simulator's answer to the prompt.
func benchOne(ctx context.Context, cl *client.Client, prompt string, words int, stream bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"input": prompt, "stream": stream})
	want := codextest.Answer(prompt, words)
	if stream {
		var text strings.Builder
		_, err := cl.Stream(ctx, body, nil, func(ev []byte) error {
			var d schemas.Event
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
	reply, err := cl.Generate(ctx, body, nil)
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

// PrintTable writes results as an aligned table, then the per-scenario error counts.
func PrintTable(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tworkers\tconc\tok\tfailed\twall s\treq/s\tp50 ms\tp95 ms\tp99 ms\tupgrades\t403s\treused\tgate wait s\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.2f\t%.1f\t%s\t%s\t%s\t%d\t%d\t%d\t%.1f\t\n",
			r.label(), r.Workers, r.Concurrency, r.OK, r.Failed, r.WallSeconds, r.ReqPerSec,
			ms(r.P50ms), ms(r.P95ms), ms(r.P99ms), r.Upgrades, r.Rejected403, r.Reused, float64(r.GateWaitMS)/1000)
	}
	tw.Flush()
	for _, r := range results {
		if j := r.Jobs; j != nil {
			fmt.Fprintf(w, "  %s c=%d: %.0f%% of codex.generate's req/s; running at most %d of %d slots, unacked at most %d (running + results being stored; %d samples); %d redelivered; worker RSS at 10/50/90%% done: %s MB\n",
				r.Mode, r.Concurrency, 100*j.OfGenerate, j.RunningMax, j.Slots, j.AckPendingMax, j.Samples, j.Redelivered, joinMB(j.RSSMB))
		}
		if r.Rate > 0 {
			fmt.Fprintf(w, "  %s: open loop at %.1f req/s\n", r.Mode, r.Rate)
		}
		if r.PeersDoubted+r.HoldsContradicted > 0 {
			fmt.Fprintf(w, "  %s c=%d: the gates found out %d peers and ended %d peers' holds by a probe (an honest fleet: none)\n",
				r.Mode, r.Concurrency, r.PeersDoubted, r.HoldsContradicted)
		}
		for k, n := range r.Errors {
			fmt.Fprintf(w, "  %s c=%d: %d × %s\n", r.Mode, r.Concurrency, n, k)
		}
	}
}

// ms formats a latency in milliseconds: two decimals below 10 ms, none above.
func ms(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func joinMB(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(parts, "/")
}
