package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
)

// errNATSDown ends a request's context when the NATS connection has been down for
// Config.UnavailableWait: its pool request cannot be answered (a reply sent while the gateway
// is away is lost), so the client gets 503 unavailable now instead of the request timeout.
var errNATSDown = errors.New("gateway: not connected to NATS")

// whileConnected returns a context that ends with the cause errNATSDown once the NATS connection
// has been down for Config.UnavailableWait without a break (at once when it is closed for good).
// A request that arrives while NATS is down so waits that long for a reconnect. stop ends the
// watch and waits for its goroutine; call it when the request is done.
func (g *Gateway) whileConnected(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	// Registered before the first look at the state, so no change in between is missed.
	changes := g.nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.watchNATS(ctx, changes, cancel)
	}()
	return ctx, func() {
		cancel(nil)
		<-done
		g.nc.RemoveStatusListener(changes)
	}
}

// watchNATS cancels ctx with errNATSDown when the connection stays down for UnavailableWait,
// counted from the change that took it down (or from the start, when it is down already).
func (g *Gateway) watchNATS(ctx context.Context, changes <-chan nats.Status, cancel context.CancelCauseFunc) {
	down := time.NewTimer(g.cfg.UnavailableWait)
	defer down.Stop()
	wasUp := false // the timer runs from the start
	for {
		if g.nc.IsClosed() {
			cancel(errNATSDown)
			return
		}
		up := g.nc.IsConnected()
		switch {
		case up:
			down.Stop()
		case wasUp:
			down.Reset(g.cfg.UnavailableWait)
		}
		wasUp = up
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-down.C:
			cancel(errNATSDown)
			return
		}
	}
}

// poolError maps what a pool call returned to the OpenAI error, as fromPool does, except that a
// request ended by a NATS outage (see whileConnected) is 503 unavailable with retry-after.
func (g *Gateway) poolError(ctx context.Context, err error) *apiError {
	if errors.Is(context.Cause(ctx), errNATSDown) {
		a := newAPIError(http.StatusServiceUnavailable, schemas.CodeUnavailable, "",
			"the gateway is not connected to NATS (down for "+g.cfg.UnavailableWait.String()+"); try again shortly")
		a.RetryAfter = g.cfg.UnavailableWait
		return a
	}
	return fromPool(err, g.cfg.RequestTimeout, g.cfg.LongWait)
}
