package queue

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue/embedded"
)

func TestConnectGivesUpWithContext(t *testing.T) {
	url := "nats://127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var logs testutil.SyncBuffer
	_, err := Connect(ctx, url, "t", slog.New(slog.NewTextHandler(&logs, nil)))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "queue: ") {
		t.Errorf("err = %v, want a queue: error wrapping the context's deadline", err)
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Errorf("no retry logged: %s", logs.String())
	}
}

func TestConnectRetriesAndReconnects(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	var logs testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	// The first attempts fail: the server starts after Connect began.
	type result struct {
		nc  *nats.Conn
		err error
	}
	connected := make(chan result, 1)
	go func() {
		nc, err := Connect(ctx, "nats://"+addr, "t", log)
		connected <- result{nc, err}
	}()
	waitFor(t, "a failed first attempt", func() bool { return strings.Contains(logs.String(), "retrying") })
	ns, err := embedded.Start(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := <-connected
	if res.err != nil {
		ns.Shutdown()
		t.Fatalf("Connect: %v", res.err)
	}
	nc := res.nc
	defer nc.Close()

	// A server restart: the connection comes back by itself and both events are logged.
	ns.Shutdown()
	ns.WaitForShutdown()
	waitFor(t, "disconnect logged", func() bool { return strings.Contains(logs.String(), "NATS disconnected") })
	ns, err = embedded.Start(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	waitFor(t, "reconnect", func() bool { return nc.IsConnected() && strings.Contains(logs.String(), "NATS reconnected") })
}

func TestStartEmbeddedBadAddress(t *testing.T) {
	for _, addr := range []string{"no-port", "127.0.0.1:http", "127.0.0.1:70000"} {
		if ns, err := embedded.Start(addr, nil); err == nil || !strings.HasPrefix(err.Error(), "queue: ") {
			if ns != nil {
				ns.Shutdown()
			}
			t.Errorf("embedded.Start(%q) err = %v, want a queue: error", addr, err)
		}
	}
}
