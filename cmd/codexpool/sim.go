package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/codexpool/codexpool/worker/codextest"
)

const simTrailer = `The simulator speaks the Codex Responses WebSocket protocol with deterministic answers, an
optional upgrade-rate limit (403 above it) and fault injection. Point workers at it with
CODEXPOOL_CODEX_URL=<the printed URL> and CODEXPOOL_CODEX_TOKEN=<--token, or anything if unset>.

Control (HTTP on the same address):
  GET  /_sim/stats                          counters as JSON (also printed on SIGUSR1 and on exit)
  POST /_sim/limit?rate=5&burst=5           change the upgrade limit at run time (rate 0 = none)
  POST /_sim/reject?n=3&status=403          answer the next n upgrades with status
  POST /_sim/fault?n=1&kind=failed          give the next n responses a fault
Per request: metadata {"sim_fault": "failed", "sim_latency_ms": "200", "sim_words": "5"}.
Faults: drop, failed, incomplete, bad_json, stall, binary, error, error:429, error_nostatus,
conn_limit, close1008.
`

func runSim(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "sim", "sim [--addr HOST:PORT] [flags]", simTrailer)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	var opts codextest.Options
	opts.BindFlags(fs.FlagSet)
	if err := fs.parse(e, args); err != nil {
		return err
	}
	srv, err := codextest.Listen(*addr, opts)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	fmt.Fprintf(e.stdout, "codexpool sim: origin %s\ncodexpool sim: control %s/stats\n", srv.URL, srv.ControlURL)

	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	printStats := func(prefix string) {
		b, _ := json.Marshal(srv.Stats())
		fmt.Fprintf(e.stdout, "codexpool sim: %s %s\n", prefix, b)
	}
	for {
		select {
		case <-usr1:
			printStats("stats")
		case <-ctx.Done():
			srv.Close()
			printStats("final stats")
			return nil
		}
	}
}
