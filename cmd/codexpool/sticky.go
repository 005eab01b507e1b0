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

// stickyStore returns the pool's session bindings (JetStream key-value bucket) when sticky
// routing is on and the server has JetStream; nil otherwise: the worker then keeps its own.
func stickyStore(ctx context.Context, nc *nats.Conn, cfg workerConfig, log *slog.Logger) worker.Bindings {
	if !cfg.Sticky {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, err := queue.NewSessionStore(sctx, nc, queue.SessionStoreConfig{Bucket: cfg.StickyBucket, TTL: cfg.StickyTTL, Replicas: cfg.CredentialsReplicas})
	switch {
	case errors.Is(err, queue.ErrNoJetStream):
		log.Info("sticky: the NATS server has no JetStream; each worker keeps its own session bindings")
		return nil
	case err != nil:
		log.Warn("sticky: no shared session bindings; each worker keeps its own", "error", err)
		return nil
	}
	log.Info("sticky: session bindings shared with the pool", "bucket", cfg.StickyBucket, "ttl", store.TTL())
	return store
}
