package netsim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLinkDelaysBothWays builds two hosts 20ms from the hub (one way), runs a TCP echo server
// in the hub and measures the round trip from each host: it must be at least twice the delay,
// and the network must be gone after Close.
func TestLinkDelaysBothWays(t *testing.T) {
	const delay = 20 * time.Millisecond
	n, err := Setup(context.Background(), Config{Hosts: 2, Delay: delay})
	if errors.Is(err, ErrUnsupported) && os.Getenv("CODEXPOOL_NETSIM_REQUIRED") == "" {
		t.Skipf("no network namespaces here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv := startEcho(t, n)
	defer srv.Process.Kill()
	for i := range n.Hosts {
		rtt := hostRoundTrip(t, n, i)
		if rtt < 2*delay {
			t.Errorf("host %d: round trip %v, want >= %v", i, rtt, 2*delay)
		}
		if rtt > 2*delay+time.Second {
			t.Errorf("host %d: round trip %v, far above %v", i, rtt, 2*delay)
		}
		t.Logf("host %d: round trip %v", i, rtt)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range append([]string{n.Hub}, n.Hosts...) {
		if strings.Contains(string(out), ns) {
			t.Errorf("namespace %s left after Close", ns)
		}
	}
}

// startEcho runs this test binary as a TCP echo server on the hub's address.
func startEcho(t *testing.T, n *Net) *exec.Cmd {
	t.Helper()
	cmd := n.HubCommand(os.Args[0], "-test.run=^TestHelperEcho$")
	cmd.Env = append(os.Environ(), "NETSIM_HELPER=echo", "NETSIM_ADDR="+HubAddr+":7001")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening") {
		t.Fatalf("echo server: %q, %v", line, err)
	}
	return cmd
}

// hostRoundTrip runs this test binary in host i as a client of the echo server and returns
// the round trip of one message after the connection is set up.
func hostRoundTrip(t *testing.T, n *Net, i int) time.Duration {
	t.Helper()
	cmd := n.HostCommand(i, os.Args[0], "-test.run=^TestHelperEcho$")
	cmd.Env = append(os.Environ(), "NETSIM_HELPER=client", "NETSIM_ADDR="+HubAddr+":7001")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("host %d client: %v (%s)", i, err, out)
	}
	var rtt time.Duration
	if _, err := fmt.Sscanf(string(out), "rtt %d", &rtt); err != nil {
		t.Fatalf("host %d client said %q", i, out)
	}
	return rtt
}
