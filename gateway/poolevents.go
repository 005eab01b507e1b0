package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/usage"
	"github.com/codexpool/codexpool/queue/client"
)

// poolEvents is a streamed pool request as every route runs it: admitted and metered (usage.go),
// on the worker its session used last (stickyworker.go), read an event at a time with Next on
// the handler's own goroutine. The end is recorded once, by Next or by Close.
type poolEvents struct {
	g   *Gateway
	ctx context.Context
	pb  poolBody
	hdr nats.Header
	evs *client.Events

	key    string // the session's sticky key; "" for none
	worker string // the worker tried first for the session; "" once the queue group has it

	tally   *tally // nil when nothing is metered
	rec     usage.Record
	release func()
	ended   bool
}

// openPool admits body and sends it as a streamed pool request.
func (g *Gateway) openPool(ctx context.Context, pb poolBody, hdr nats.Header) (*poolEvents, error) {
	t, rec, release, err := g.admit(ctx, pb)
	if err != nil {
		return nil, err
	}
	meteredHere(t, hdr)
	p := &poolEvents{g: g, ctx: ctx, pb: pb, hdr: hdr, tally: t, rec: rec, release: release}
	if p.key = stickyKey(pb, hdr); p.key != "" {
		p.worker = g.hints.get(p.key)
	}
	if err := p.send(); err != nil {
		p.end(err)
		return nil, err
	}
	return p, nil
}

// send opens the request on the session's worker, or on the queue group.
func (p *poolEvents) send() error {
	cl := p.g.cl
	if p.worker != "" {
		cl = cl.OnWorker(p.worker)
	}
	open := cl.Open
	if p.pb.streaming {
		open = cl.OpenStreaming
	}
	evs, err := open(p.ctx, p.pb.body, p.hdr)
	p.evs = evs
	return err
}

// Next returns the next event: io.EOF at the end, client.ErrIdle when nothing came within d of
// idle (the stream goes on), else the pool's error. A session's worker that is gone or full
// before its first event hands the request to the queue group.
func (p *poolEvents) Next(ctx context.Context, idle time.Duration) ([]byte, error) {
	p.evs.SetIdle(idle)
	ev, err := p.evs.Next(ctx)
	switch {
	case err == nil:
		p.meter(ev)
		return ev, nil
	case errors.Is(err, client.ErrIdle):
		return nil, err
	case p.worker != "" && !p.evs.Started() && workerUnavailable(err):
		p.g.hints.forget(p.key, p.worker)
		p.worker = ""
		p.evs.Close()
		if err := p.send(); err != nil {
			p.end(err)
			return nil, err
		}
		return p.Next(ctx, idle)
	}
	if errors.Is(err, io.EOF) {
		p.end(nil)
	} else {
		p.end(err)
	}
	return nil, err
}

// meter takes the tokens of a terminal event (response.completed, or response.incomplete and
// response.failed, which report them too).
func (p *poolEvents) meter(ev []byte) {
	if p.tally == nil {
		return
	}
	switch fastType(ev) {
	case "response.completed", "response.incomplete", "response.failed":
		var e struct {
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal(ev, &e) == nil {
			tokensOf(&p.rec, e.Response)
		}
	}
}

// end records how the request ended (err nil for a full stream), once.
func (p *poolEvents) end(err error) {
	if p.ended {
		return
	}
	p.ended = true
	var reply *client.Reply
	if p.evs != nil && err == nil {
		reply = p.evs.Reply()
	}
	if p.key != "" {
		p.g.learnWorker(p.key, reply, err)
	}
	if p.tally == nil {
		return
	}
	p.release()
	if reply != nil {
		p.rec.Account = reply.Account
	}
	p.g.record(p.rec, err)
}

// Close stops a request that did not reach its end (the client is gone) and records it.
func (p *poolEvents) Close() {
	if p.evs != nil {
		p.evs.Close()
	}
	p.end(context.Canceled)
}

// streamPool runs body as a streamed pool request, calling fn with each event, for the routes
// that answer once at the end.
func (g *Gateway) streamPool(ctx context.Context, pb poolBody, hdr nats.Header, fn func([]byte) error) error {
	p, err := g.openPool(ctx, pb, hdr)
	if err != nil {
		return err
	}
	defer p.Close()
	for {
		ev, err := p.Next(ctx, 0)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}
