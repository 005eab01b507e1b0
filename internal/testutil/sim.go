package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

// NewSim starts an origin simulator with opts. At cleanup (after the cleanups registered later,
// such as the clients that use it) it waits up to 5 s for every socket to be closed, fails the
// test when one was left open, and closes the simulator.
func NewSim(t testing.TB, opts codextest.Options) *codextest.Server {
	t.Helper()
	srv := codextest.NewServer(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.WaitIdle(ctx); err != nil {
			t.Errorf("simulator still has %d open sockets after the test", srv.Stats().OpenSockets)
		}
		srv.Close()
	})
	return srv
}
