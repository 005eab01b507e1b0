package proxytest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SOCKS5 is a running microsocks SOCKS5 server (RFC 1928, user/password auth of RFC 1929)
// admitting one user; it is killed when the test ends.
type SOCKS5 struct {
	Addr    string       // host:port it listens on
	Tunnels atomic.Int64 // connections it opened for the admitted user (its "connected to" lines)

	cmd  *exec.Cmd
	done chan struct{}
	kill sync.Once
}

// NeedSOCKS5 returns the path of microsocks, or skips t naming what is missing; with CI set it
// fails instead (.ci/run installs the package).
func NeedSOCKS5(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("microsocks")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("microsocks not installed (Debian package microsocks; .ci/run installs it): %v", err)
		}
		t.Skipf("needs microsocks (apt-get install microsocks; CI installs it): %v", err)
	}
	return path
}

// NewSOCKS5 starts microsocks on 127.0.0.1 admitting user with password. from, if not empty,
// is the local address it dials out from (e.g. 127.0.0.3).
func NewSOCKS5(t testing.TB, user, password, from string) *SOCKS5 {
	t.Helper()
	bin := NeedSOCKS5(t)
	for try := 0; ; try++ {
		p, err := startSOCKS5(bin, user, password, from)
		if err == nil {
			t.Cleanup(p.Kill)
			return p
		}
		if try == 4 {
			t.Fatalf("proxytest: microsocks: %v", err)
		}
	}
}

// startSOCKS5 starts microsocks on a free port (it takes no listener of ours, so the port is
// found free first and the start is retried if another process took it meanwhile).
func startSOCKS5(bin, user, password, from string) (*SOCKS5, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	args := []string{"-i", "127.0.0.1", "-p", port, "-u", user, "-P", password}
	if from != "" {
		args = append(args, "-b", from)
	}
	p := &SOCKS5{Addr: addr, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go p.count(out)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("exited at start (port %s taken?)", port)
		default:
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("not listening on %s after 10s", addr)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// count reads microsocks' log: a line "client[N] IP: connected to HOST:PORT" per tunnel.
func (p *SOCKS5) count(out io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), ": connected to ") {
			p.Tunnels.Add(1)
		}
	}
	_ = p.cmd.Wait()
}

// Kill stops the server: its listener and every tunnel close with the process.
func (p *SOCKS5) Kill() {
	p.kill.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

// URL is the proxy's URL with scheme (socks5 or socks5h) and user:password.
func (p *SOCKS5) URL(scheme, user, password string) string {
	return scheme + "://" + user + ":" + password + "@" + p.Addr
}

// Port is the port it listens on.
func (p *SOCKS5) Port() int {
	_, port, _ := net.SplitHostPort(p.Addr)
	n, _ := strconv.Atoi(port)
	return n
}

// WaitTunnels waits until n tunnels are counted (the log line may trail the tunnel's first
// bytes), up to within; it returns the count seen.
func (p *SOCKS5) WaitTunnels(n int64, within time.Duration) int64 {
	deadline := time.Now().Add(within)
	for p.Tunnels.Load() < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
	return p.Tunnels.Load()
}
