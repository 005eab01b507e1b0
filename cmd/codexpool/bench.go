package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/internal/bench"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/worker/codextest"
)

const benchTrailer = `Starts (or joins, with --nats) a NATS server, an origin simulator and --workers worker
PROCESSES (the gate is per process), fires --requests requests at each --concurrency, checks
every answer, and prints one row per (mode, concurrency): ok/failed, wall time, req/s, latency
percentiles, upgrades accepted, 403s, sockets reused, time waited in the gates. Every scenario
starts fresh workers, so one mode's gate state never helps another.

Examples:
  codexpool bench --compare fixed,adaptive --concurrency 30 --latency 1s --reuse=false
  codexpool bench --concurrency 1,10,100,500,1000 --latency 1s --requests 0 --plot sweep.svg
  codexpool bench --compare reference,adaptive --reuse=false --upgrade-rate 5 --upgrade-burst 5 --latency 500ms --concurrency 60
  codexpool bench --jobs --workers 2 --max-inflight 64 --concurrency 128 --requests 10000 --latency 200ms
  codexpool bench --accounts two.yaml --account-counts 1,2 --reuse=false --latency 500ms --concurrency 60
  codexpool bench --accounts three.yaml --workers 4 --sessions 20 --turns 10 --latency 200ms
  codexpool bench --hosts 4 --delay 10ms --workers 8 --scopes process,account --upgrade-rate 5 --upgrade-burst 5 --reuse=false --concurrency 60

--hosts H (root, iproute2) runs NATS, the origin and the load in a network namespace of their own
and the workers in H more, each --delay away one way (a delay line over TUN links), all torn down
afterwards. The namespaces share this machine's hostname, so scope host spans them.
`

func runBench(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "bench", "bench [flags]", benchTrailer)
	opts, finish := benchFlags(fs)
	if err := fs.parse(e, args); err != nil {
		return err
	}
	if err := finish(); err != nil {
		fs.printUsage(e.stderr)
		return exitError{code: 2, msg: "bench: " + err.Error()}
	}
	// Joining a worker's embedded server: present this user's credential, as every local command
	// does; the URL carries it to the workers bench starts.
	if opts.NATSURL != "" {
		a, err := queue.ReadLocalAuth(localAuthPath(e.getenv))
		if err == nil && queue.LoopbackURLs(opts.NATSURL) {
			opts.NATSURL = a.URLs(opts.NATSURL)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if hosts := e.getenv(bench.HostsEnv); hosts != "" { // the bench inside RunInHosts's hub
		var err error
		if opts.HostNamespaces, opts.HostDelay, err = bench.ParseHostsEnv(hosts); err != nil {
			return err
		}
	} else if opts.hosts > 0 {
		return benchInHosts(ctx, e, *opts, args)
	}
	return benchMain(ctx, e, *opts)
}

// benchInHosts runs this bench again inside a network of simulated hosts (--hosts, --delay).
func benchInHosts(ctx context.Context, e env, o benchOptions, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: find own executable: %w", err)
	}
	err = bench.RunInHosts(ctx, o.hosts, o.delay, exe, append([]string{"bench"}, args...), e.stdout, e.stderr)
	var ee bench.ExitCodeError
	if errors.As(err, &ee) {
		return exitError{code: ee.Code}
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// benchOptions are the bench flags: the engine's configuration plus how to report.
type benchOptions struct {
	bench.Config
	jsonOut    bool
	plot       string
	timeline   bool
	minSpeedup float64
	sessions   int // > 0: the sessions scenario (sticky on, off, one account) instead
	turns      int
	hosts      int           // --hosts: simulated hosts (0 = all on loopback)
	delay      time.Duration // --delay: their one-way delay
}

// benchLists are the bench flags that are parsed into benchOptions after the flags are.
type benchLists struct {
	workers, conc, modes, sched, scopes, accountsFile, acctCounts string
}

// benchFlags binds the bench flags to benchOptions; finish validates after parsing.
func benchFlags(fs *flags) (*benchOptions, func() error) {
	o, l := &benchOptions{}, &benchLists{}
	cfg := &o.Config
	fs.StringVar(&cfg.NATSURL, "nats", "", "join this NATS server (default: start an embedded one)")
	fs.StringVar(&l.workers, "workers", "1", "worker processes; a comma list runs a sweep (e.g. 1,2,4)")
	fs.IntVar(&cfg.Requests, "requests", 0, "requests per scenario (0 = --rounds x --concurrency)")
	fs.IntVar(&cfg.Rounds, "rounds", 1, "with --requests 0: requests per scenario = rounds x concurrency")
	fs.StringVar(&l.conc, "concurrency", "30", "requests in flight; a comma list runs a sweep (e.g. 1,10,100)")
	fs.StringVar(&l.modes, "compare", "adaptive", "gate modes to run side by side: any of adaptive,reference,fixed,off")
	fs.DurationVar(&cfg.FixedSpacing, "fixed-spacing", time.Second, "the spacing of the fixed mode (the reference proxy's 1s)")
	fs.BoolVar(&cfg.Reuse, "reuse", true, "let workers reuse completed sockets (CODEXPOOL_WS_REUSE)")
	fs.IntVar(&cfg.MaxInflight, "max-inflight", 2048, "CODEXPOOL_MAX_INFLIGHT of each worker")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "per-request client timeout")
	fs.BoolVar(&cfg.Stream, "stream", false, "request streamed replies")
	fs.BoolVar(&o.jsonOut, "json", false, "print the results as JSON instead of a table")
	fs.StringVar(&o.plot, "plot", "", "write an SVG chart of req/s against concurrency per mode to this file")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "no progress bar")
	fs.BoolVar(&cfg.Baseline, "baseline", false, "also measure a bare NATS request-reply echo at each concurrency (the ceiling)")
	fs.Float64Var(&o.minSpeedup, "min-speedup", 0, "fail unless the last --compare mode's req/s is at least this many times the first's, at every concurrency (CI check)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "open-loop load for this long at --rate (instead of --requests at --concurrency)")
	fs.Float64Var(&cfg.Rate, "rate", 10, "arrivals per second with --duration")
	fs.StringVar(&l.sched, "limit-schedule", "", "change the origin's upgrade limit during the load, e.g. \"20s:50/50,40s:5/5\" (offset:rate/burst)")
	fs.BoolVar(&o.timeline, "timeline", false, "print upgrades accepted/rejected per second")
	fs.StringVar(&l.scopes, "scopes", "", "run every scenario once per gate scope, side by side: a comma list of process and a shared scope (e.g. process,host)")
	fs.IntVar(&cfg.GateFlood, "gate-flood", 0, "publish this many bogus gate-state messages per second to each shared scenario's gate subject during its load")
	fs.BoolVar(&cfg.Jobs, "jobs", false, "also run every scenario as a batch of durable jobs (JetStream), side by side with codex.generate")
	fs.StringVar(&l.accountsFile, "accounts", "", "the simulator's accounts file (as for sim --accounts; every account needs a token); the workers get them as CODEXPOOL_ACCOUNTS")
	fs.StringVar(&l.acctCounts, "account-counts", "", "with --accounts: run each scenario with the workers using the first N accounts, for each N of this comma list (e.g. 1,2; default all)")
	fs.IntVar(&o.sessions, "sessions", 0, "with --accounts: run N concurrent conversations of --turns turns (session_id header, each turn resending the conversation) with sticky routing on, off, and on one account, side by side")
	fs.IntVar(&o.turns, "turns", 10, "turns per conversation of --sessions")
	fs.IntVar(&o.hosts, "hosts", 0, "run the workers on this many simulated hosts (network namespaces, round-robin), --delay from NATS and the origin; needs root and iproute2")
	fs.DurationVar(&o.delay, "delay", 10*time.Millisecond, "with --hosts: the one-way delay between each host and NATS and the origin")
	cfg.Sim = codextest.Options{Latency: time.Second}
	bindSimFlags(fs.FlagSet, &cfg.Sim)
	return o, func() error { return l.apply(o) }
}

// apply parses the lists into o and checks the flags together, in the order of their help.
func (l *benchLists) apply(o *benchOptions) error {
	cfg := &o.Config
	var err error
	if err := l.applyAccounts(cfg); err != nil {
		return err
	}
	if cfg.Schedule, err = bench.ParseSchedule(l.sched); err != nil {
		return fmt.Errorf("--limit-schedule: %v", err)
	}
	if cfg.Duration < 0 || (cfg.Duration > 0 && cfg.Rate <= 0) {
		return fmt.Errorf("--duration needs a positive --rate")
	}
	if cfg.WorkerCounts, err = bench.ParseCounts(l.workers); err != nil {
		return fmt.Errorf("--workers: %v", err)
	}
	cfg.Workers = cfg.WorkerCounts[0]
	if cfg.Concurrency, err = bench.ParseCounts(l.conc); err != nil {
		return fmt.Errorf("--concurrency: %v", err)
	}
	if cfg.Scopes, err = parseScopes(l.scopes); err != nil {
		return err
	}
	if cfg.GateFlood < 0 {
		return fmt.Errorf("--gate-flood must be >= 0")
	}
	if cfg.Modes, err = parseModes(l.modes); err != nil {
		return err
	}
	switch {
	case cfg.Requests < 0:
		return fmt.Errorf("--requests must be >= 0")
	case cfg.Rounds < 1:
		return fmt.Errorf("--rounds must be at least 1")
	case cfg.Timeout <= 0:
		return fmt.Errorf("--timeout must be positive")
	case cfg.MaxInflight < 1:
		return fmt.Errorf("--max-inflight must be at least 1")
	case o.minSpeedup > 0 && len(cfg.Modes) < 2:
		return fmt.Errorf("--min-speedup needs two modes in --compare")
	case o.hosts < 0 || o.hosts > 200:
		return fmt.Errorf("--hosts must be 0..200")
	case o.hosts > 0 && cfg.NATSURL != "":
		return fmt.Errorf("--hosts runs its own NATS in the hub: drop --nats")
	case o.delay < 0:
		return fmt.Errorf("--delay must be >= 0")
	}
	return nil
}

// applyAccounts loads --accounts and parses --account-counts.
func (l *benchLists) applyAccounts(cfg *bench.Config) error {
	var err error
	if l.accountsFile != "" {
		if cfg.Accounts, err = codextest.LoadAccounts(l.accountsFile); err != nil {
			return fmt.Errorf("--accounts: %v", err)
		}
	}
	if l.acctCounts != "" {
		if l.accountsFile == "" {
			return fmt.Errorf("--account-counts needs --accounts")
		}
		if cfg.AccountCounts, err = bench.ParseCounts(l.acctCounts); err != nil {
			return fmt.Errorf("--account-counts: %v", err)
		}
	}
	return nil
}

// parseScopes parses --scopes: a comma list of gate scopes, none empty ("" = none).
func parseScopes(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var out []string
	for _, sc := range strings.Split(list, ",") {
		if sc = strings.TrimSpace(sc); sc == "" {
			return nil, fmt.Errorf("--scopes: empty scope in %q", list)
		}
		out = append(out, sc)
	}
	return out, nil
}

// parseModes parses --compare: a comma list of gate modes.
func parseModes(list string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(list, ",") {
		m = strings.TrimSpace(m)
		if _, err := gate.ParseMode(m); err != nil || m == "" {
			return nil, fmt.Errorf("--compare: unknown gate mode %q: %v", m, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// benchMain runs the engine with this binary as the workers' and reports as asked.
func benchMain(ctx context.Context, e env, o benchOptions) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: find own executable: %w", err)
	}
	o.Exe, o.Progress = exe, e.stderr
	if o.sessions > 0 {
		return benchSessions(ctx, e, o)
	}
	results, err := bench.Run(ctx, o.Config)
	if o.jsonOut {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(results)
	} else if len(results) > 0 {
		bench.PrintTable(e.stdout, results)
		if o.timeline {
			bench.PrintTimeline(e.stdout, results)
		}
	}
	if o.plot != "" && len(results) > 0 {
		if perr := os.WriteFile(o.plot, []byte(bench.PlotSVG(results)), 0o644); perr != nil {
			return fmt.Errorf("bench: write plot: %w", perr)
		}
		fmt.Fprintf(e.stderr, "bench: wrote %s\n", o.plot)
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if o.minSpeedup > 0 {
		for _, s := range bench.Speedups(results, o.Modes, o.Concurrency) {
			if s.Ratio() < o.minSpeedup {
				return exitError{code: 1, msg: fmt.Sprintf("bench: at concurrency %d %s made %.2f req/s and %s %.2f: speedup %.2fx, want >= %.2fx",
					s.Concurrency, s.Last, s.B, s.First, s.A, s.Ratio(), o.minSpeedup)}
			}
			fmt.Fprintf(e.stdout, "bench: speedup %s/%s at concurrency %d: %.2fx (>= %.2fx required)\n", s.Last, s.First, s.Concurrency, s.Ratio(), o.minSpeedup)
		}
	}
	for _, r := range results {
		if r.Failed > 0 {
			return exitError{code: 1, msg: fmt.Sprintf("bench: %d of %d requests failed in mode %s at concurrency %d", r.Failed, r.Requests, r.Mode, r.Concurrency)}
		}
	}
	return nil
}

// benchSessions runs and reports the sessions scenario (--sessions).
func benchSessions(ctx context.Context, e env, o benchOptions) error {
	rows, err := bench.RunSticky(ctx, o.Config, o.sessions, o.turns)
	if o.jsonOut {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rows)
	} else if len(rows) > 0 {
		bench.PrintSticky(e.stdout, rows)
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}
