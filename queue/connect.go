package queue

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
)

// Reconnect backoff: doubling from reconnectBase up to reconnectMax, plus up to 50% jitter, so a
// restarted NATS server is not hit by every worker at the same instant.
const (
	reconnectBase = 250 * time.Millisecond
	reconnectMax  = 5 * time.Second
)

// backoff returns the wait before attempt n (0-based): exponential, capped, with jitter.
func backoff(n int) time.Duration {
	d := reconnectBase
	for i := 0; i < n && d < reconnectMax; i++ {
		d *= 2
	}
	d = min(d, reconnectMax)
	return d + rand.N(d/2+1)
}

// Connect connects to the NATS server(s) at url (comma-separated list allowed) with the connection
// name name. The first connection is retried with backoff until it succeeds or ctx is done, except
// when retrying cannot help (credentials refused, a TLS certificate or file problem): that error is
// returned at once. Once connected, the connection reconnects forever with backoff and jitter.
// Disconnects, reconnects, the final close and asynchronous errors (e.g. slow consumers) are logged
// to logger (nil: discarded). extra options (e.g. Security.Options) are applied after Connect's own.
func Connect(ctx context.Context, url, name string, logger *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := logger.With("component", "nats")
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(func(attempts int) time.Duration { return backoff(attempts - 1) }),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", "error", err)
			} else {
				log.Info("NATS disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				log.Warn("NATS connection closed", "error", err)
			} else {
				log.Info("NATS connection closed")
			}
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Error("NATS async error", "subject", sub.Subject, "error", err)
				return
			}
			log.Error("NATS async error", "error", err)
		}),
	}
	opts = append(opts, extra...)
	for attempt := 0; ; attempt++ {
		nc, err := nats.Connect(url, opts...)
		if err == nil {
			return nc, nil
		}
		if permanent(err) {
			return nil, fmt.Errorf("queue: connect to NATS at %s: %w%s", RedactURL(url), err, tlsHint(err))
		}
		wait := backoff(attempt)
		log.Warn("NATS connect failed; retrying", "error", err, "attempt", attempt+1, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("queue: connect to NATS (last error: %v): %w", err, ctx.Err())
		case <-t.C:
		}
	}
}
