package main

import (
	"context"
	"fmt"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

const demoTrailer = `The demo needs no account and nothing installed: it starts an embedded NATS server, the
origin simulator and two worker processes, sends a burst of requests through NATS, checks every
answer and prints the result table. It exits 0 only when every request succeeded.
`

func runDemo(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "demo", "demo [flags]", demoTrailer)
	var o benchOptions
	cfg := &o.Config
	cfg.Modes, cfg.FixedSpacing, cfg.Timeout = []string{"adaptive"}, time.Second, time.Minute
	fs.IntVar(&cfg.Workers, "workers", 2, "worker processes")
	fs.IntVar(&cfg.Requests, "requests", 200, "requests in the burst")
	conc := fs.Int("concurrency", 50, "requests in flight")
	fs.BoolVar(&cfg.Reuse, "reuse", true, "let workers reuse completed sockets")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "no progress bar")
	latency := fs.Duration("latency", 500*time.Millisecond, "simulated generation latency")
	if err := fs.parse(e, args); err != nil {
		return err
	}
	if cfg.Workers < 1 || cfg.Requests < 1 || *conc < 1 || *latency < 0 {
		return exitError{code: 2, msg: "demo: --workers, --requests and --concurrency must be at least 1, --latency >= 0"}
	}
	cfg.Concurrency = []int{*conc}
	cfg.MaxInflight = 256
	cfg.Sim = codextest.Options{Latency: *latency, Words: 8}
	fmt.Fprintf(e.stdout, "codexpool demo: embedded NATS + origin simulator (%s latency) + %d worker processes; %d requests, %d in flight\n",
		*latency, cfg.Workers, cfg.Requests, *conc)
	if err := benchMain(ctx, e, o); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "codexpool demo: every request succeeded and every answer was checked.")
	return nil
}
