package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/codexpool/codexpool/internal/netsim"
)

// HostsEnv names the variable through which a bench that built a multi-host network
// (RunInHosts) tells the bench it starts inside the hub where the hosts are: their namespaces,
// comma-separated, then "@" and the one-way delay. It is not a CODEXPOOL_ setting.
const HostsEnv = "CXPBENCH_HOST_NAMESPACES"

// RunInHosts builds a network of hosts hosts, each delay away from a hub (one way), runs exe
// with args inside the hub (NATS, the origin simulator and the load run there; the workers are
// spread over the hosts round-robin) with HostsEnv set, and tears the network down however the
// run ends: also on ctx's end (the inner bench gets SIGINT and stops its workers) and on
// failure. It needs root and iproute2 (the error says which is missing).
func RunInHosts(ctx context.Context, hosts int, delay time.Duration, exe string, args []string, stdout, stderr io.Writer) error {
	n, err := netsim.Setup(ctx, netsim.Config{Hosts: hosts, Delay: delay})
	if err != nil {
		if errors.Is(err, netsim.ErrUnsupported) {
			return fmt.Errorf("--hosts: %w", err)
		}
		return err
	}
	defer n.Close()
	fmt.Fprintf(stderr, "bench: %d hosts %v from the hub one way (namespaces %s, %s…)\n", hosts, delay, n.Hub, n.Hosts[0])
	cmd := n.HubCommand(exe, args...)
	cmd.Env = append(cmd.Environ(), HostsEnv+"="+strings.Join(n.Hosts, ",")+"@"+delay.String())
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so that a Ctrl-C reaches it once, from us (a second SIGINT kills a
	// codexpool process at once, leaving its workers behind); and a SIGTERM if we die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: start the bench in the hub: %w", err)
	}
	return waitInner(ctx, cmd)
}

// waitInner waits for the inner bench; on ctx's end it asks it to stop (SIGINT, as Ctrl-C
// would) and waits up to a minute more before killing it.
func waitInner(ctx context.Context, cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return innerError(err)
	case <-ctx.Done():
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
	}
	return ctx.Err()
}

// ExitCodeError is the inner bench's non-zero exit: its output already said why.
type ExitCodeError struct{ Code int }

func (e ExitCodeError) Error() string { return fmt.Sprintf("bench in the hub exited %d", e.Code) }

func innerError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ExitCodeError{Code: ee.ExitCode()}
	}
	return err
}

// ParseHostsEnv reads HostsEnv's value into the host namespaces and the delay.
func ParseHostsEnv(v string) (hosts []string, delay time.Duration, err error) {
	list, d, ok := strings.Cut(v, "@")
	if !ok || list == "" {
		return nil, 0, fmt.Errorf("bench: %s=%q: want ns1,ns2,…@delay", HostsEnv, v)
	}
	if delay, err = time.ParseDuration(d); err != nil {
		return nil, 0, fmt.Errorf("bench: %s: %w", HostsEnv, err)
	}
	return strings.Split(list, ","), delay, nil
}

// workerCommand is the command of worker i: exe worker, in its host's namespace if any.
func workerCommand(cfg Config, exe string, i int) *exec.Cmd {
	if len(cfg.HostNamespaces) == 0 {
		return exec.Command(exe, "worker")
	}
	cmd := netsim.Command(cfg.HostNamespaces[i%len(cfg.HostNamespaces)], exe, "worker")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // no worker outlives this bench
	return cmd
}

// listenHost is where the rig's servers listen: the hub's address when the workers are on
// simulated hosts, else loopback.
func listenHost(cfg Config) string {
	if len(cfg.HostNamespaces) > 0 {
		return netsim.HubAddr
	}
	return "127.0.0.1"
}
