package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/jsonobj"
)

// Jobs is the durable job store behind "background": true (the contract's Durable jobs). The
// gateway only submits and reads back; workers run the jobs.
type Jobs interface {
	// Submit stores body (the request without "background") as a durable job with the headers
	// hdr and returns its id once stored. The id must be hdr's Codex-Request-Id: the gateway's
	// request id, which carries the key that may read the job back (see GET /v1/responses/{id}).
	// Errors may be *schemas.Error.
	Submit(ctx context.Context, body []byte, hdr nats.Header) (id string, err error)
	// Result returns the result of job id: body is exactly what codex.generate would have
	// replied (the response JSON, or the contract error body {"error": {...}}), done is false
	// while there is none. An id the store knows nothing of may give an error wrapping
	// ErrJobNotFound (404); a store that cannot tell reports it as not done.
	Result(ctx context.Context, id string) (body []byte, done bool, err error)
}

// ErrJobNotFound is what Jobs.Result wraps for an unknown id.
var ErrJobNotFound = errors.New("gateway: no such job")

// jobLookupTimeout bounds one Jobs.Result call.
const jobLookupTimeout = 10 * time.Second

// pending is the Responses API object of a background response that has no result yet.
type pending struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	CreatedAt  int64  `json:"created_at,omitempty"`
	Status     string `json:"status"`
	Background bool   `json:"background"`
	Model      string `json:"model,omitempty"`
	Output     []any  `json:"output"`
	// Error is set only on a failed job (status "failed"), as the Responses API does.
	Error *failure `json:"error,omitempty"`
}

type failure struct {
	Code    schemas.Code `json:"code"`
	Message string       `json:"message"`
}

// submitBackground answers "background": true: the request becomes a durable job and the
// answer is a queued response whose id is the job id.
func (g *Gateway) submitBackground(ctx context.Context, w http.ResponseWriter, req request, hdr nats.Header) outcome {
	var a *apiError
	switch {
	case g.cfg.Jobs == nil:
		a = newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, "background",
			`"background": this gateway has no durable job store, so it cannot keep a response to poll later; use "stream": true for long generations`)
	case req.stream:
		a = newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, "stream",
			`"stream": a background response cannot be streamed here; poll GET /v1/responses/{id} instead`)
	}
	if a != nil {
		a.write(w)
		return failed(a)
	}
	// A background request counts against its key's model list and limits as any other does; it
	// is recorded in the key's usage, with its tokens, when its result is read (recordBackground).
	t, _, release, aerr := g.admit(ctx, req.poolBody)
	if aerr != nil {
		a := g.poolError(ctx, aerr)
		a.write(w)
		return failed(a)
	}
	meteredHere(t, hdr)
	id, err := g.cfg.Jobs.Submit(ctx, req.body, hdr)
	if t != nil {
		release()
	}
	if err == nil && id != hdr.Get(schemas.HeaderRequestID) {
		// Its owner could not read it back: a bug of the store, refused before the client waits.
		err = fmt.Errorf("the job store named the job %s, not its request id", quoteShort(id))
	}
	if err != nil {
		a := g.poolError(ctx, err)
		a.write(w)
		return failed(a)
	}
	b, _ := json.Marshal(pending{ID: id, Object: "response", CreatedAt: time.Now().Unix(), Status: "queued",
		Background: true, Model: req.model, Output: []any{}})
	writeJSON(w, http.StatusOK, b)
	return ok(http.StatusOK)
}

// getResponse serves GET /v1/responses/{id}: a background response as it progresses, to the key
// that made it only (who; anyone else is told it does not exist). Only jobs are stored; other
// responses never are (the pool is stateless).
func (g *Gateway) getResponse(w http.ResponseWriter, r *http.Request, who owner, id string) outcome {
	notFound := func(msg string) outcome {
		a := newAPIError(http.StatusNotFound, CodeNotFound, "", msg)
		a.write(w)
		return failed(a)
	}
	if g.cfg.Jobs == nil {
		return notFound("gateway: responses are not stored (no durable job store is configured), so there is nothing to retrieve")
	}
	if !who.owns(id) {
		return notFound("gateway: no background response has the id " + quoteShort(id))
	}
	ctx, cancel := context.WithTimeout(r.Context(), jobLookupTimeout)
	defer cancel()
	ctx, stop := g.whileConnected(ctx)
	defer stop()
	body, done, err := g.cfg.Jobs.Result(ctx, id)
	switch {
	case errors.Is(err, ErrJobNotFound):
		return notFound("gateway: no background response has the id " + quoteShort(id))
	case err != nil:
		a := g.poolError(ctx, err)
		a.write(w)
		return failed(a)
	case !done:
		b, _ := json.Marshal(pending{ID: id, Object: "response", Status: "queued", Background: true, Output: []any{}})
		writeJSON(w, http.StatusOK, b)
		return ok(http.StatusOK)
	}
	g.recordBackground(r.Context(), id, body)
	if e, isErr := schemas.ResultError(body); isErr {
		b, _ := json.Marshal(pending{ID: id, Object: "response", Status: "failed", Background: true, Output: []any{},
			Error: &failure{Code: e.Code, Message: e.Message}})
		writeJSON(w, http.StatusOK, b)
		o := ok(http.StatusOK)
		o.code = e.Code
		return o
	}
	ms, isObj := jsonobj.Members(body)
	if !isObj || !json.Valid(body) {
		a := newAPIError(http.StatusBadGateway, schemas.CodeUpstreamError, "", "gateway: the stored result of job "+id+" is not a JSON object")
		a.write(w)
		return failed(a)
	}
	// The job id is the only handle this API knows, so it is the response's id; the rest of the
	// stored reply is returned as it was.
	quoted, _ := json.Marshal(id)
	body = jsonobj.WithMember(body, ms, "id", quoted)
	ms, _ = jsonobj.Members(body)
	body = jsonobj.WithMember(body, ms, "background", []byte("true"))
	writeJSON(w, http.StatusOK, withoutNullError(body))
	return ok(http.StatusOK)
}

// quoteShort quotes s for a message, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}
