// Package testutil holds the helpers codexpool's tests share: a goroutine-safe buffer for logs
// and process output, polling a condition with a deadline, and a free loopback port.
//
// Tests call [WaitFor] where state changes on another goroutine or in another process and there
// is nothing to block on; it polls, so it is for conditions, never for "wait a bit". Time-based
// logic is tested with testing/synctest instead.
package testutil

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers (log handlers, NATS
// callbacks, a child process's stdout and stderr).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor polls cond every couple of milliseconds until it holds, and fails the test when it
// does not within timeout, naming what was awaited.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// FreePort returns a loopback TCP port nothing listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// StartServer starts a NATS server with opts in this process (for tests that need users,
// permissions or JetStream settings of their own), waits until it accepts clients, and shuts it
// down when the test ends.
func StartServer(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready after 10s")
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}
