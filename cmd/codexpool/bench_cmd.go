package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/codexpool/codexpool/gate"
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
`

func runBench(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "bench", "bench [flags]", benchTrailer)
	cfg, finish := benchFlags(fs)
	if err := fs.parse(e, args); err != nil {
		return err
	}
	if err := finish(); err != nil {
		fs.printUsage(e.stderr)
		return exitError{code: 2, msg: "bench: " + err.Error()}
	}
	return benchMain(ctx, e, *cfg)
}

// benchFlags binds the bench flags to a benchConfig; finish validates after parsing.
func benchFlags(fs *flags) (*benchConfig, func() error) {
	cfg := &benchConfig{}
	fs.StringVar(&cfg.natsURL, "nats", "", "join this NATS server (default: start an embedded one)")
	workersFlag := fs.String("workers", "1", "worker processes; a comma list runs a sweep (e.g. 1,2,4)")
	fs.IntVar(&cfg.requests, "requests", 0, "requests per scenario (0 = --rounds x --concurrency)")
	fs.IntVar(&cfg.rounds, "rounds", 1, "with --requests 0: requests per scenario = rounds x concurrency")
	conc := fs.String("concurrency", "30", "requests in flight; a comma list runs a sweep (e.g. 1,10,100)")
	modes := fs.String("compare", "adaptive", "gate modes to run side by side: any of adaptive,reference,fixed,off")
	fs.DurationVar(&cfg.fixedSpacing, "fixed-spacing", time.Second, "the spacing of the fixed mode (the reference proxy's 1s)")
	fs.BoolVar(&cfg.reuse, "reuse", true, "let workers reuse completed sockets (CODEXPOOL_WS_REUSE)")
	fs.IntVar(&cfg.maxInflight, "max-inflight", 2048, "CODEXPOOL_MAX_INFLIGHT of each worker")
	fs.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "per-request client timeout")
	fs.BoolVar(&cfg.stream, "stream", false, "request streamed replies")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print the results as JSON instead of a table")
	fs.StringVar(&cfg.plot, "plot", "", "write an SVG chart of req/s against concurrency per mode to this file")
	fs.BoolVar(&cfg.quiet, "quiet", false, "no progress bar")
	fs.BoolVar(&cfg.baseline, "baseline", false, "also measure a bare NATS request-reply echo at each concurrency (the ceiling)")
	fs.Float64Var(&cfg.minSpeedup, "min-speedup", 0, "fail unless the last --compare mode's req/s is at least this many times the first's, at every concurrency (CI check)")
	fs.DurationVar(&cfg.duration, "duration", 0, "open-loop load for this long at --rate (instead of --requests at --concurrency)")
	fs.Float64Var(&cfg.rate, "rate", 10, "arrivals per second with --duration")
	sched := fs.String("limit-schedule", "", "change the origin's upgrade limit during the load, e.g. \"20s:50/50,40s:5/5\" (offset:rate/burst)")
	fs.BoolVar(&cfg.timeline, "timeline", false, "print upgrades accepted/rejected per second")
	cfg.sim = codextest.Options{Latency: time.Second}
	cfg.sim.BindFlags(fs.FlagSet)
	return cfg, func() error {
		var err error
		if cfg.schedule, err = parseSchedule(*sched); err != nil {
			return fmt.Errorf("--limit-schedule: %v", err)
		}
		if cfg.duration < 0 || (cfg.duration > 0 && cfg.rate <= 0) {
			return fmt.Errorf("--duration needs a positive --rate")
		}
		cfg.workerCounts = nil
		for _, s := range strings.Split(*workersFlag, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				return fmt.Errorf("--workers: %q is not a positive number", s)
			}
			cfg.workerCounts = append(cfg.workerCounts, n)
		}
		cfg.workers = cfg.workerCounts[0]
		cfg.concurrency = nil
		for _, s := range strings.Split(*conc, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				return fmt.Errorf("--concurrency: %q is not a positive number", s)
			}
			cfg.concurrency = append(cfg.concurrency, n)
		}
		cfg.modes = nil
		for _, m := range strings.Split(*modes, ",") {
			m = strings.TrimSpace(m)
			if _, err := gate.ParseMode(m); err != nil || m == "" {
				return fmt.Errorf("--compare: unknown gate mode %q: %v", m, err)
			}
			cfg.modes = append(cfg.modes, m)
		}
		switch {
		case cfg.requests < 0:
			return fmt.Errorf("--requests must be >= 0")
		case cfg.rounds < 1:
			return fmt.Errorf("--rounds must be at least 1")
		case cfg.timeout <= 0:
			return fmt.Errorf("--timeout must be positive")
		case cfg.maxInflight < 1:
			return fmt.Errorf("--max-inflight must be at least 1")
		case cfg.minSpeedup > 0 && len(cfg.modes) < 2:
			return fmt.Errorf("--min-speedup needs two modes in --compare")
		}
		return nil
	}
}

func benchMain(ctx context.Context, e env, cfg benchConfig) error {
	results, err := runBenchConfig(ctx, e, cfg)
	if cfg.jsonOut {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(results)
	} else if len(results) > 0 {
		printResults(e.stdout, results)
		if cfg.timeline {
			printTimeline(e.stdout, results)
		}
	}
	if cfg.plot != "" && len(results) > 0 {
		if perr := os.WriteFile(cfg.plot, []byte(plotSVG(results)), 0o644); perr != nil {
			return fmt.Errorf("bench: write plot: %w", perr)
		}
		fmt.Fprintf(e.stderr, "bench: wrote %s\n", cfg.plot)
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if cfg.minSpeedup > 0 {
		if err := checkSpeedup(e, cfg, results); err != nil {
			return err
		}
	}
	for _, r := range results {
		if r.Failed > 0 {
			return exitError{code: 1, msg: fmt.Sprintf("bench: %d of %d requests failed in mode %s at concurrency %d", r.Failed, r.Requests, r.Mode, r.Concurrency)}
		}
	}
	return nil
}

const demoTrailer = `The demo needs no account and nothing installed: it starts an embedded NATS server, the
origin simulator and two worker processes, sends a burst of requests through NATS, checks every
answer and prints the result table. It exits 0 only when every request succeeded.
`

func runDemo(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "demo", "demo [flags]", demoTrailer)
	cfg := benchConfig{modes: []string{"adaptive"}, fixedSpacing: time.Second, timeout: time.Minute}
	fs.IntVar(&cfg.workers, "workers", 2, "worker processes")
	fs.IntVar(&cfg.requests, "requests", 200, "requests in the burst")
	conc := fs.Int("concurrency", 50, "requests in flight")
	fs.BoolVar(&cfg.reuse, "reuse", true, "let workers reuse completed sockets")
	fs.BoolVar(&cfg.quiet, "quiet", false, "no progress bar")
	latency := fs.Duration("latency", 500*time.Millisecond, "simulated generation latency")
	if err := fs.parse(e, args); err != nil {
		return err
	}
	if cfg.workers < 1 || cfg.requests < 1 || *conc < 1 || *latency < 0 {
		return exitError{code: 2, msg: "demo: --workers, --requests and --concurrency must be at least 1, --latency >= 0"}
	}
	cfg.concurrency = []int{*conc}
	cfg.maxInflight = 256
	cfg.sim = codextest.Options{Latency: *latency, Words: 8}
	fmt.Fprintf(e.stdout, "codexpool demo: embedded NATS + origin simulator (%s latency) + %d worker processes; %d requests, %d in flight\n",
		*latency, cfg.workers, cfg.requests, *conc)
	if err := benchMain(ctx, e, cfg); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "codexpool demo: every request succeeded and every answer was checked.")
	return nil
}

// checkSpeedup compares the last mode of --compare with the first at every concurrency: a ratio
// measured in one run, so it holds on a busy machine where absolute times do not.
func checkSpeedup(e env, cfg benchConfig, results []scenarioResult) error {
	first, last := cfg.modes[0], cfg.modes[len(cfg.modes)-1]
	for _, c := range cfg.concurrency {
		var a, b float64
		for _, r := range results {
			if r.Concurrency == c && r.Mode == first {
				a = r.ReqPerSec
			}
			if r.Concurrency == c && r.Mode == last {
				b = r.ReqPerSec
			}
		}
		if a <= 0 || b/a < cfg.minSpeedup {
			return exitError{code: 1, msg: fmt.Sprintf("bench: at concurrency %d %s made %.2f req/s and %s %.2f: speedup %.2fx, want >= %.2fx",
				c, last, b, first, a, b/max(a, 1e-9), cfg.minSpeedup)}
		}
		fmt.Fprintf(e.stdout, "bench: speedup %s/%s at concurrency %d: %.2fx (>= %.2fx required)\n", last, first, c, b/a, cfg.minSpeedup)
	}
	return nil
}

// printTimeline prints, per scenario, upgrades accepted/rejected in each second.
func printTimeline(w io.Writer, results []scenarioResult) {
	for _, r := range results {
		fmt.Fprintf(w, "timeline %s (second: accepted/rejected upgrades, completed):\n", r.Mode)
		for i, t := range r.Timeline {
			fmt.Fprintf(w, "  %3ds %3d/%-3d %3d", t.T, t.Accepted, t.Rejected, t.Completed)
			if i%5 == 4 {
				fmt.Fprintln(w)
			}
		}
		fmt.Fprintln(w)
	}
}
