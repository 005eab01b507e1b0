package bench

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/worker/codextest"
)

// rig is what every scenario of a run shares: the origin simulator and NATS.
type rig struct {
	srv     *codextest.Server
	nc      *nats.Conn
	url     string
	closers []func() // undone in reverse by close
}

// startRig starts the simulator and, unless cfg.NATSURL, an embedded NATS server (with
// JetStream for cfg.Jobs), and connects to NATS.
func startRig(cfg Config) (*rig, error) {
	rg := &rig{}
	srv, err := codextest.Listen(listenHost(cfg)+":0", cfg.Sim)
	if err != nil {
		return nil, fmt.Errorf("bench: start simulator: %w", err)
	}
	rg.srv = srv
	rg.closers = append(rg.closers, srv.Close)
	rg.url = cfg.NATSURL
	if rg.url == "" {
		if err := rg.startNATS(listenHost(cfg), cfg.Jobs); err != nil {
			rg.close()
			return nil, err
		}
	}
	nc, err := nats.Connect(rg.url, nats.Name("codexpool bench"))
	if err != nil {
		rg.close()
		return nil, fmt.Errorf("bench: connect to NATS at %s: %w", queue.RedactURL(rg.url), err)
	}
	rg.nc = nc
	rg.closers = append(rg.closers, nc.Close)
	return rg, nil
}

// startNATS starts the embedded NATS server, with JetStream in a directory of its own.
func (rg *rig) startNATS(host string, jetStream bool) error {
	var opts []embedded.Option
	if jetStream {
		dir, err := os.MkdirTemp("", "codexpool-bench-js")
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		rg.closers = append(rg.closers, func() { _ = os.RemoveAll(dir) })
		opts = append(opts, embedded.WithJetStream(dir))
	}
	// Like a worker's embedded server, bench's admits only clients with its credential: its own
	// (random, in memory) reaches the workers it starts inside their NATS URL.
	auth := queue.NewLocalAuth()
	ns, err := embedded.Start(host+":0", nil, append(opts, queue.WithLocalAuth(auth))...)
	if err != nil {
		return fmt.Errorf("bench: start embedded NATS: %w", err)
	}
	rg.closers = append(rg.closers, func() { ns.Shutdown(); ns.WaitForShutdown() })
	rg.url = auth.URL(ns.ClientURL())
	return nil
}

func (rg *rig) close() {
	for i := len(rg.closers) - 1; i >= 0; i-- {
		rg.closers[i]()
	}
}

// pool is one scenario's fresh worker processes, serving a subject of their own.
type pool struct {
	rig     *rig
	subject string
	procs   []*workerProc
}

// startPool starts cfg.Workers workers in gate mode serving subject, waits until every one
// serves and resets the simulator's counters, so the scenario counts only its own load.
func startPool(ctx context.Context, cfg Config, rg *rig, mode, subject string) (*pool, error) {
	procs, err := startWorkers(ctx, cfg, rg.url, subject, rg.srv.URL, mode)
	if err != nil {
		return nil, err
	}
	if err := waitServing(ctx, rg.nc, subject, cfg.Workers, procs); err != nil {
		stopWorkers(procs)
		return nil, err
	}
	rg.srv.ResetStats()
	return &pool{rig: rg, subject: subject, procs: procs}, nil
}

func (p *pool) stop() { stopWorkers(p.procs) }

// originFigures fills in what the simulator counted and the time the workers waited in their
// gates.
func (p *pool) originFigures(ctx context.Context, res *Result) {
	st := p.rig.srv.Stats()
	res.Upgrades, res.Rejected, res.Rejected403, res.Reused = st.UpgradesAccepted, st.UpgradesRejected, st.Rejected403, st.ReusedResponses
	gs := gateStats(ctx, p.rig.nc, p.subject)
	res.GateWaitMS = gs.waited.Milliseconds()
	res.PeersDoubted, res.HoldsContradicted = gs.peersDoubted, gs.holdsContradicted
}

// scenarioTotal is the requests of a closed-loop scenario at conc.
func scenarioTotal(cfg Config, conc int) int {
	if cfg.Requests > 0 {
		return cfg.Requests
	}
	return max(cfg.Rounds, 1) * conc
}

// simWords is the length of the simulator's answers.
func simWords(cfg Config) int {
	if cfg.Sim.Words == 0 {
		return 8
	}
	return cfg.Sim.Words
}
