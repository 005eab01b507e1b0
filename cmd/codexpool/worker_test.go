package main

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/embedded"
)

// workerEnv is the environment of an in-process worker that embeds its NATS server on a free port.
func workerEnv(more map[string]string) map[string]string {
	env := map[string]string{
		"CODEXPOOL_EMBEDDED_NATS_ADDR": "127.0.0.1:0",
		"CODEXPOOL_JOBS":               "off",
		"CODEXPOOL_CODEX_TOKEN":        "test-token",
		"CODEXPOOL_CODEX_URL":          "http://127.0.0.1:1/backend-api/codex/responses",
		"CODEXPOOL_SHUTDOWN_GRACE":     "1s",
		"CODEXPOOL_LOG_FORMAT":         "json",
		"CODEXPOOL_LOG_LEVEL":          "debug",
	}
	for k, v := range more {
		env[k] = v
	}
	return env
}

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// TestWorkerStopsInOrder runs `codexpool worker` in process with a fake getenv and stops it: the
// NATS connection's own "closed" line (queue.Connect's handler) is logged before "stopped".
func TestWorkerStopsInOrder(t *testing.T) {
	var stderr testutil.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"worker"}, envOf(workerEnv(nil)), strings.NewReader(""), &testutil.SyncBuffer{}, &stderr)
	}()
	waitFor(t, 30*time.Second, `the "serving" line`, func() bool { return strings.Contains(stderr.String(), `"msg":"serving"`) })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("worker did not stop\n%s", stderr.String())
	}
	out := stderr.String()
	order := []string{`"msg":"shutting down`, `"msg":"NATS connection closed"`, `"msg":"stopped"`}
	at := 0
	for _, line := range order {
		i := strings.Index(out[at:], line)
		if i < 0 {
			t.Fatalf("log lacks %s after the previous step; want %q in order:\n%s", line, order, out)
		}
		at += i
	}
}

// TestWorkerFailedStartUndoesItsSteps: a start that fails after the metrics server, the NATS
// connection and the worker are up (CODEXPOOL_JOBS=on without JetStream) releases them all.
func TestWorkerFailedStartUndoesItsSteps(t *testing.T) {
	ns, err := embedded.Start("127.0.0.1:0", nil) // no JetStream
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	env := workerEnv(map[string]string{"CODEXPOOL_NATS_URL": ns.ClientURL(), "CODEXPOOL_JOBS": "on", "CODEXPOOL_METRICS_ADDR": metricsAddr})
	var stderr testutil.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = run(ctx, []string{"worker"}, envOf(env), strings.NewReader(""), &testutil.SyncBuffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "CODEXPOOL_JOBS=on") {
		t.Fatalf("got %v, want the CODEXPOOL_JOBS=on error\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "metrics listening") {
		t.Fatalf("the metrics server never started, so the test proves nothing:\n%s", stderr.String())
	}
	ln, err = net.Listen("tcp", metricsAddr)
	if err != nil {
		t.Fatalf("the metrics address is still taken after the failed start: %v", err)
	}
	ln.Close()
	waitFor(t, 10*time.Second, "the worker's NATS connection to close", func() bool { return ns.NumClients() == 0 })
}

// TestWorkerEmbeddedAddrTaken: a worker whose embedded address is held by a server it cannot
// join (another user's, or no NATS at all) fails at once, naming the two variables that fix it,
// instead of waiting 10 s for a server that cannot start.
func TestWorkerEmbeddedAddrTaken(t *testing.T) {
	other, err := embedded.Start("127.0.0.1:0", nil, queue.WithLocalAuth(queue.NewLocalAuth()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Shutdown(); other.WaitForShutdown() })
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts connections, never speaks NATS
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tests := []struct {
		name, addr, wantErr string
	}{
		{"another user's server", strings.TrimPrefix(other.ClientURL(), "nats://"), "Authorization Violation"},
		{"not a NATS server", ln.Addr().String(), "i/o timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			if _, err := queue.LoadOrCreateLocalAuth(filepath.Join(state, "codexpool", queue.LocalAuthFileName)); err != nil {
				t.Fatal(err)
			}
			env := workerEnv(map[string]string{"CODEXPOOL_EMBEDDED_NATS_ADDR": tt.addr, "XDG_STATE_HOME": state})
			var stderr testutil.SyncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			err := run(ctx, []string{"worker"}, envOf(env), strings.NewReader(""), &testutil.SyncBuffer{}, &stderr)
			took := time.Since(start)
			for _, want := range []string{"cannot embed a NATS server on " + tt.addr, tt.wantErr,
				"Set CODEXPOOL_NATS_URL", "CODEXPOOL_EMBEDDED_NATS_ADDR to a free address"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %v, want an error containing %q\n%s", err, want, stderr.String())
				}
			}
			if took > 5*time.Second {
				t.Errorf("the worker took %s to fail, want it at once", took)
			}
		})
	}
}
