package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/worker"
)

// leaseStore returns the pool's account slots (JetStream key-value leases) when an account has
// max_concurrent and the server has JetStream, and the function that closes it; without them
// nil: max_concurrent then holds per worker only, and the log says so.
func leaseStore(ctx context.Context, nc *nats.Conn, cfg workerConfig, accts []worker.Account, log *slog.Logger) (worker.Slots, func()) {
	capped := false
	for _, a := range accts {
		capped = capped || a.MaxConcurrent > 0
	}
	if !capped {
		return nil, func() {}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := queue.NewLeaseStore(sctx, nc, queue.LeaseStoreConfig{TTL: cfg.AccountLeaseTTL,
		Replicas: cfg.CredentialsReplicas, Owner: cfg.id(), Logger: log})
	switch {
	case errors.Is(err, queue.ErrNoJetStream):
		log.Warn("account slots: the NATS server has no JetStream; max_concurrent holds per worker, not across the pool")
		return nil, func() {}
	case err != nil:
		log.Warn("account slots: no shared slots; max_concurrent holds per worker, not across the pool", "error", err)
		return nil, func() {}
	}
	log.Info("account slots: max_concurrent holds across the pool", "bucket", queue.DefaultLeasesBucket, "lease_ttl", store.TTL())
	return store, store.Close
}
