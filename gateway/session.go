package gateway

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
)

// poolCall is what a request to the pool runs with: a context that ends with the request, after
// Config.RequestTimeout or when NATS stays down (whileConnected), and the headers of r's session
// with the request id. Call done when the request is over.
func (g *Gateway) poolCall(r *http.Request, id string) (ctx context.Context, hdr nats.Header, done func()) {
	ctx, cancel := context.WithTimeout(r.Context(), g.cfg.RequestTimeout)
	ctx, stop := g.whileConnected(ctx)
	hdr = sessionHeaders(r)
	hdr.Set(schemas.HeaderRequestID, id)
	return ctx, hdr, func() { stop(); cancel() }
}

// sessionHeaders starts the NATS headers of a pool request with the client's session headers
// (schemas.SessionHeaders), which the workers route on: a session's turns go to one account.
func sessionHeaders(r *http.Request) nats.Header {
	hdr := nats.Header{}
	for _, k := range schemas.SessionHeaders {
		if v := r.Header.Get(k); v != "" {
			hdr.Set(k, v)
		}
	}
	return hdr
}
