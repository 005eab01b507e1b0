package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	usagestore "github.com/codexpool/codexpool/internal/usage"
	"github.com/codexpool/codexpool/worker"
)

// usageObserver records, per account, the usage of each finished generation that no gateway
// records (Generation.Metered unset: sent straight over NATS, or a job), and passes every
// generation on to next (the metrics; nil = none).
type usageObserver struct {
	next worker.Observer
	rec  *usagestore.Recorder
}

func (o usageObserver) ObserveGeneration(g worker.Generation) {
	if o.next != nil {
		o.next.ObserveGeneration(g)
	}
	if g.Metered {
		return
	}
	r := usagestore.Record{Account: g.Account, Model: g.Model, Error: g.Code}
	r.SetTokens(g.Usage)
	o.rec.Record(r)
}

// usageRecorder opens the worker's usage recorder when CODEXPOOL_USAGE is on and the server has
// JetStream; nil otherwise (said once in the log).
func usageRecorder(ctx context.Context, nc *nats.Conn, cfg workerConfig, log *slog.Logger) *usagestore.Recorder {
	if !cfg.Usage {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = js.AccountInfo(sctx)
	}
	if err == nil {
		var rec *usagestore.Recorder
		if rec, err = usagestore.OpenRecorder(sctx, js, usagestore.Config{}); err == nil {
			return rec
		}
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		log.Info("usage: the NATS server has no JetStream; requests straight over NATS are not recorded")
	} else {
		log.Warn("usage: requests straight over NATS are not recorded", "error", err)
	}
	return nil
}

// closeUsage waits up to 5 s for the usage records not yet acknowledged (before NATS drains).
func (m *workerMain) closeUsage() {
	if m.usage == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.usage.Close(ctx); err != nil {
		m.log.Warn("usage records", "error", err)
	}
}
