package gateway

import (
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
)

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
