package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/codexpool/codexpool/schemas"
)

// Infos asks every running worker for its micro INFO ($SRV.INFO.codexpool) and returns the
// answers that arrive within wait (or until ctx ends). Each names the worker (Metadata "worker")
// and the subject it serves.
func Infos(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]micro.Info, error) {
	return gather[micro.Info](ctx, nc, micro.InfoVerb, wait)
}

// Stats asks every running worker for its micro STATS ($SRV.STATS.codexpool). The true counters
// (in flight, completed, errors by code, the gate and the socket pool) are each endpoint's Data.
func Stats(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]micro.Stats, error) {
	return gather[micro.Stats](ctx, nc, micro.StatsVerb, wait)
}

// gather publishes one discovery request and decodes every reply until wait passes; replies that
// do not decode are skipped.
func gather[T any](ctx context.Context, nc *nats.Conn, verb micro.Verb, wait time.Duration) ([]T, error) {
	subject, err := micro.ControlSubject(verb, schemas.ServiceName, "")
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("client: subscribe %s: %w", inbox, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil, fmt.Errorf("client: publish %s: %w", subject, err)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var out []T
	for {
		select {
		case m := <-ch:
			var v T
			if json.Unmarshal(m.Data, &v) == nil {
				out = append(out, v)
			}
		case <-timer.C:
			return out, nil
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
}
