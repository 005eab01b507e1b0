// Package embedded runs the NATS server inside a codexpool process (nats-server/v2): the
// zero-setup pool of `codexpool demo`, a worker with CODEXPOOL_EMBEDDED_NATS_ADDR, and the tests.
package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long Start waits for the server to accept clients.
const readyTimeout = 10 * time.Second

// Option configures Start.
type Option func(*server.Options)

// storeLockWait is how long Start waits for a store another server holds.
const storeLockWait = 2 * time.Second

// ErrStoreInUse is wrapped by Start's error when another embedded server (of this or
// another process) has the JetStream store directory.
var ErrStoreInUse = errors.New("the JetStream store is in use by another embedded NATS server")

// WithJetStream turns JetStream on, with its file store in dir (created when missing). Two
// servers must never share a store directory.
func WithJetStream(dir string) Option {
	return func(o *server.Options) {
		o.JetStream = true
		o.StoreDir = dir
	}
}

// Start starts an in-process NATS server (nats-server/v2; JetStream off unless
// WithJetStream) listening on addr, e.g. "127.0.0.1:4222"; port 0 picks a free port (read it back
// with ClientURL). Other processes can connect to it and join the pool. It returns once the server
// accepts connections; the caller stops it with Shutdown and WaitForShutdown. Server log lines go
// to logger (nil: discarded).
func Start(addr string, logger *slog.Logger, options ...Option) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("queue: embedded NATS address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("queue: embedded NATS address %q: bad port", addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "codexpool-embedded",
		Host:       host,
		Port:       port,
		NoSigs:     true,
	}
	for _, o := range options {
		o(opts)
	}
	unlock := func() {}
	if opts.JetStream {
		if err := os.MkdirAll(opts.StoreDir, 0o700); err != nil {
			return nil, fmt.Errorf("queue: embedded NATS store: %w", err)
		}
		// A server of this process that just shut down frees the store a moment later: wait a
		// little before calling the store taken.
		u, err := lockStore(filepath.Join(opts.StoreDir, "codexpool.lock"))
		for deadline := time.Now().Add(storeLockWait); errors.Is(err, ErrStoreInUse) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			u, err = lockStore(filepath.Join(opts.StoreDir, "codexpool.lock"))
		}
		if err != nil {
			return nil, fmt.Errorf("queue: embedded NATS store %s: %w", opts.StoreDir, err)
		}
		unlock = u
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("queue: embedded NATS: %w", err)
	}
	if logger != nil {
		ns.SetLoggerV2(&serverLogger{log: logger.With("component", "nats-server")}, false, false, false)
	}
	ns.Start()
	go func() { // the store stays this server's until it shuts down
		ns.WaitForShutdown()
		unlock()
	}()
	if !ns.ReadyForConnections(readyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("queue: embedded NATS on %s not ready after %s", addr, readyTimeout)
	}
	return ns, nil
}

// serverLogger adapts slog to the nats-server logger interface.
type serverLogger struct{ log *slog.Logger }

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }

// WithUser makes the server accept only clients that present user and password.
func WithUser(user, password string) Option {
	return func(o *server.Options) {
		o.Users = []*server.User{{Username: user, Password: password}}
	}
}
