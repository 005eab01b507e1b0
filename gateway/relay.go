package gateway

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
)

// relay is the loop every streamed route runs: the pool's events, translated and written by
// onEvent as they arrive; SSE keep-alive comments while the origin is silent (after onIdle, which
// may flush what onEvent held back); and, when the pool request ends, onEnd's answer. After a
// failed write nothing more is written and the pool request is cancelled; onEnd gets that write's
// error. onEvent reports whether it wrote anything (which restarts the keep-alive timer).
type relay struct {
	onEvent func(ev []byte) (wrote bool, err error)
	onIdle  func() error // nil: nothing to flush
	onEnd   func(err, writeErr error) outcome
}

// relay streams body from the pool through r, writing to sw.
func (g *Gateway) relay(ctx context.Context, sw *sse, body []byte, hdr nats.Header, r relay) outcome {
	events, end, cancel := g.poolStream(ctx, body, hdr)
	defer cancel()
	keepAlive := time.NewTimer(g.cfg.KeepAlive)
	defer keepAlive.Stop()
	var writeErr error
	for {
		select {
		case ev := <-events:
			if writeErr != nil {
				continue // the client is gone; the stream is being cancelled
			}
			wrote, err := r.onEvent(ev)
			if writeErr = err; writeErr != nil {
				cancel()
			}
			if wrote {
				keepAlive.Reset(g.cfg.KeepAlive)
			}
		case <-keepAlive.C:
			if writeErr != nil {
				continue
			}
			if r.onIdle != nil {
				writeErr = r.onIdle()
			}
			if writeErr == nil {
				writeErr = sw.comment("keep-alive")
			}
			if writeErr != nil {
				cancel()
			}
			keepAlive.Reset(g.cfg.KeepAlive)
		case err := <-end:
			// fn hands over every event before Stream returns, so nothing is left in events.
			return r.onEnd(err, writeErr)
		}
	}
}
