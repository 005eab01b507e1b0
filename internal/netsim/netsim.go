package netsim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config describes the network to build. Zero values are the defaults given per field.
type Config struct {
	Hosts int           // host namespaces; at least 1 (required)
	Delay time.Duration // one-way delay of every packet on a host's link; 0 = none
	// Queue is the packets a link holds in flight per direction before it drops; default 4096.
	Queue int
}

// ErrUnsupported is returned (wrapped) by Setup when this machine cannot build the network:
// not root, no iproute2, not Linux, or no TUN device.
var ErrUnsupported = errors.New("netsim: network namespaces unavailable")

// HubAddr is the hub's address as the hosts reach it.
const HubAddr = "10.213.0.1"

// Net is a built network. Its methods are safe for concurrent use.
type Net struct {
	Hub   string   // the hub namespace's name
	Hosts []string // the host namespaces' names, in order
	Delay time.Duration

	links    []*link
	closeErr error
	once     sync.Once
}

// HubAddr returns the hub's address as the hosts reach it.
func (n *Net) HubAddr() string { return HubAddr }

// HostAddr returns host i's address (0-based).
func (n *Net) HostAddr(i int) string { return fmt.Sprintf("10.213.%d.2", i+1) }

// HubCommand returns a command running name with args in the hub namespace.
func (n *Net) HubCommand(name string, args ...string) *exec.Cmd {
	return nsCommand(n.Hub, name, args...)
}

// HostCommand returns a command running name with args in host namespace i (0-based).
func (n *Net) HostCommand(i int, name string, args ...string) *exec.Cmd {
	return nsCommand(n.Hosts[i], name, args...)
}

// Command returns a command running name with args in namespace ns.
func Command(ns, name string, args ...string) *exec.Cmd { return nsCommand(ns, name, args...) }

func nsCommand(ns, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Setup builds the network of cfg. On any error it undoes what it built.
func Setup(ctx context.Context, cfg Config) (*Net, error) {
	if cfg.Hosts < 1 || cfg.Hosts > 200 {
		return nil, fmt.Errorf("netsim: Hosts must be 1..200, got %d", cfg.Hosts)
	}
	if cfg.Delay < 0 {
		return nil, fmt.Errorf("netsim: Delay must be >= 0, got %v", cfg.Delay)
	}
	if err := supported(); err != nil {
		return nil, err
	}
	removeStale(ctx)
	tag := make([]byte, 3)
	_, _ = rand.Read(tag)
	prefix := "cxp" + strconv.Itoa(os.Getpid()) + "x" + hex.EncodeToString(tag)
	n := &Net{Hub: prefix + "-hub", Delay: cfg.Delay}
	for i := range cfg.Hosts {
		n.Hosts = append(n.Hosts, fmt.Sprintf("%s-h%d", prefix, i+1))
	}
	if err := n.build(ctx, cfg); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

// supported says why this machine cannot build a network, or nil.
func supported() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (network namespaces and TUN devices), running as uid %d", ErrUnsupported, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: needs iproute2's ip on PATH (apt-get install iproute2): %v", ErrUnsupported, err)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("%w: needs /dev/net/tun (CONFIG_TUN): %v", ErrUnsupported, err)
	}
	return platformSupported()
}

// build makes the namespaces, then one link per host.
func (n *Net) build(ctx context.Context, cfg Config) error {
	for _, ns := range append([]string{n.Hub}, n.Hosts...) {
		if err := ip(ctx, "netns", "add", ns); err != nil {
			return err
		}
		if err := n.prepare(ctx, ns); err != nil {
			return err
		}
	}
	for i := range n.Hosts {
		l, err := n.addLink(ctx, i, cfg)
		if err != nil {
			return err
		}
		n.links = append(n.links, l)
	}
	return nil
}

// prepare brings a fresh namespace's loopback up and turns off reverse-path filtering (every
// hub-side link shares the hub's one address).
func (n *Net) prepare(ctx context.Context, ns string) error {
	if err := ip(ctx, "-n", ns, "link", "set", "lo", "up"); err != nil {
		return err
	}
	for _, key := range []string{"all", "default"} {
		path := "net.ipv4.conf." + key + ".rp_filter=0"
		if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "sysctl", "-q", "-w", path).CombinedOutput(); err != nil {
			return fmt.Errorf("netsim: sysctl %s in %s: %v: %s", path, ns, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// addLink creates host i's TUN pair, addresses it and starts its delay line.
func (n *Net) addLink(ctx context.Context, i int, cfg Config) (*link, error) {
	hubDev, hostDev := fmt.Sprintf("cxp%d", i+1), "cxp0"
	hubEnd, err := openTUN(n.Hub, hubDev)
	if err != nil {
		return nil, err
	}
	hostEnd, err := openTUN(n.Hosts[i], hostDev)
	if err != nil {
		hubEnd.Close()
		return nil, err
	}
	l := startLink(hubEnd, hostEnd, cfg.Delay, cfg.Queue)
	steps := [][]string{
		{"-n", n.Hub, "addr", "add", HubAddr, "peer", n.HostAddr(i) + "/32", "dev", hubDev},
		{"-n", n.Hub, "link", "set", hubDev, "up"},
		{"-n", n.Hosts[i], "addr", "add", n.HostAddr(i), "peer", HubAddr + "/32", "dev", hostDev},
		{"-n", n.Hosts[i], "link", "set", hostDev, "up"},
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			l.stop()
			return nil, err
		}
	}
	return l, nil
}

// Close stops every process left in the namespaces (SIGKILL: their owner is gone or done),
// stops the delay lines and deletes the namespaces. It returns the first error.
func (n *Net) Close() error {
	n.once.Do(func() {
		names := append([]string{n.Hub}, n.Hosts...)
		for _, ns := range names {
			killAll(ns)
		}
		for _, l := range n.links {
			l.stop()
		}
		for _, ns := range names {
			if err := ip(context.Background(), "netns", "del", ns); err != nil && n.closeErr == nil && !strings.Contains(err.Error(), "No such file") {
				n.closeErr = err
			}
		}
	})
	return n.closeErr
}

// removeStale deletes the namespaces of earlier runs whose process is gone (one that was
// killed before it could call Close), after killing what still runs in them.
func removeStale(ctx context.Context) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "cxp") {
			continue
		}
		pidText, _, ok := strings.Cut(strings.TrimPrefix(f[0], "cxp"), "x")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		killAll(f[0])
		_ = ip(ctx, "netns", "del", f[0])
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// killAll kills the processes still running in namespace ns, by id.
func killAll(ns string) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
}

// ip runs iproute2's ip with args.
func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netsim: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
