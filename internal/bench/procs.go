package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
)

// workerEnv returns the environment of a bench worker process for mode.
func workerEnv(cfg Config, natsURL, subject, originURL, mode string, i int) []string {
	env := os.Environ()
	gateMode, floor := mode, 0
	if mode == "fixed" {
		floor = int(cfg.FixedSpacing / time.Millisecond)
	}
	token := simToken(cfg)
	if cfg.accountsFile != "" {
		env = append(env, "CODEXPOOL_ACCOUNTS="+cfg.accountsFile)
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
		"CODEXPOOL_WS_REUSE="+strconv.FormatBool(cfg.Reuse),
		"CODEXPOOL_MAX_INFLIGHT="+strconv.Itoa(cfg.MaxInflight),
		"CODEXPOOL_LOG_LEVEL=warn",
		"CODEXPOOL_LOG_FORMAT=json",
		"CODEXPOOL_JOBS=off",
		"CODEXPOOL_EMBEDDED_NATS_STORE="+os.TempDir(),
	)
}

type workerProc struct {
	cmd    *exec.Cmd
	stderr *tailBuffer
	done   chan error
}

func startWorkers(ctx context.Context, cfg Config, natsURL, subject, originURL, mode string) ([]*workerProc, error) {
	exe := cfg.Exe
	if exe == "" {
		return nil, fmt.Errorf("bench: Config.Exe names no codexpool binary")
	}
	var procs []*workerProc
	for i := range cfg.Workers {
		cmd := workerCommand(cfg, exe, i)
		cmd.Env = append(workerEnv(cfg, natsURL, subject, originURL, mode, i), cfg.WorkerEnv...) // later entries win
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
		if got := countServing(ctx, nc, subject); got >= n {
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

// countServing counts the workers serving subject, found through micro discovery ($SRV.INFO).
func countServing(ctx context.Context, nc *nats.Conn, subject string) int {
	infos, _ := client.Infos(ctx, nc, 150*time.Millisecond)
	n := 0
	for _, info := range infos {
		for _, ep := range info.Endpoints {
			if ep.Subject == subject {
				n++
			}
		}
	}
	return n
}

// gateTotals is what the workers' gates report, summed over the workers.
type gateTotals struct {
	waited                          time.Duration // time callers spent waiting
	peersDoubted, holdsContradicted int64         // peers found out; an honest fleet has none
}

// gateStats sums the gate sections of the stats data of the workers serving subject.
func gateStats(ctx context.Context, nc *nats.Conn, subject string) gateTotals {
	stats, _ := client.Stats(ctx, nc, 200*time.Millisecond)
	var total gateTotals
	for _, st := range stats {
		for _, ep := range st.Endpoints {
			if ep.Subject != subject {
				continue
			}
			var d struct {
				Gate struct {
					WaitedMS int64 `json:"waited_ms"`
					Signals  struct {
						PeersDoubted      int64 `json:"peers_doubted"`
						HoldsContradicted int64 `json:"holds_contradicted"`
					} `json:"signals"`
				} `json:"gate"`
			}
			if json.Unmarshal(ep.Data, &d) == nil {
				total.waited += time.Duration(d.Gate.WaitedMS) * time.Millisecond
				total.peersDoubted += d.Gate.Signals.PeersDoubted
				total.holdsContradicted += d.Gate.Signals.HoldsContradicted
			}
		}
	}
	return total
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
			sum += RSS(p.cmd.Process.Pid)
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

// RSS returns a process's resident set size in bytes (Linux; 0 elsewhere).
func RSS(pid int) int64 {
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

// simToken is the token the workers present to the simulator.
func simToken(cfg Config) string {
	if cfg.Sim.Token != "" {
		return cfg.Sim.Token
	}
	return "sim-token"
}
