package gateway

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
)

// relay is the loop every streamed route runs: the pool's events, translated and written by
// onEvent as they arrive; SSE keep-alive comments while nothing was written for KeepAlive (after
// onIdle, which may flush what onEvent held back); and, when the pool request ends, onEnd's
// answer. After a failed write nothing more is written and the pool request is stopped; onEnd
// gets that write's error. onEvent reports whether it wrote anything.
type relay struct {
	onEvent func(ev []byte) (wrote bool, err error)
	onIdle  func() error // nil: nothing to flush
	onEnd   func(err, writeErr error) outcome
}

// relay streams body from the pool through r, writing to sw, all on the handler's goroutine.
func (g *Gateway) relay(ctx context.Context, sw *sse, pb poolBody, hdr nats.Header, r relay) outcome {
	p, err := g.openPool(ctx, pb, hdr)
	if err != nil {
		return r.onEnd(err, nil)
	}
	defer p.Close()
	lastWrite := time.Now()
	for {
		ev, err := p.Next(ctx, max(time.Millisecond, g.cfg.KeepAlive-time.Since(lastWrite)))
		switch {
		case errors.Is(err, client.ErrIdle):
			if err := g.keepAlive(sw, r); err != nil {
				return r.onEnd(context.Canceled, err)
			}
			lastWrite = time.Now()
			continue
		case errors.Is(err, io.EOF):
			return r.onEnd(nil, nil)
		case err != nil:
			return r.onEnd(err, nil)
		}
		wrote, err := r.onEvent(ev)
		if err != nil {
			return r.onEnd(context.Canceled, err)
		}
		if wrote {
			lastWrite = time.Now()
		}
	}
}

// keepAlive flushes what r held back and writes a keep-alive comment.
func (g *Gateway) keepAlive(sw *sse, r relay) error {
	if r.onIdle != nil {
		if err := r.onIdle(); err != nil {
			return err
		}
	}
	return sw.comment("keep-alive")
}
