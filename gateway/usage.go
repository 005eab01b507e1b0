package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/usage"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/jsonobj"
)

// Meter is what the gateway needs of the usage store (*usage.Store is one): admission under a
// key's limits, one record per finished pool request, and the report of GET /v1/usage.
type Meter interface {
	Admit(ctx context.Context, key string, lim usage.Limits) (release func(), err error)
	Record(usage.Record)
	// RecordOnce records r as the only record of id, however often (and by whichever gateway)
	// it is recorded: a background response's, when its result is read.
	RecordOnce(id string, r usage.Record)
	Query(ctx context.Context, since time.Time, by string) (usage.Report, error)
}

// Codes of the gateway's own limits.
const (
	// CodeRateLimitExceeded (429): the client key is over one of its limits (OpenAI's code).
	CodeRateLimitExceeded schemas.Code = "rate_limit_exceeded"
	// CodeModelNotAllowed (403): the client key may not request this model.
	CodeModelNotAllowed schemas.Code = "model_not_allowed"
	// CodeForbidden (403): the key may not use this route (GET /v1/usage without admin).
	CodeForbidden schemas.Code = "forbidden"
)

// tallyKey is the context key of a request's *tally.
type tallyKey struct{}

// tally is one request's metering: its key, and the record of its pool request.
type tally struct {
	key *Key
}

// metered returns ctx carrying the request's tally, when the gateway meters.
func (g *Gateway) metered(ctx context.Context, k *Key) context.Context {
	if g.cfg.Meter == nil {
		return ctx
	}
	return context.WithValue(ctx, tallyKey{}, &tally{key: k})
}

// admit checks the request's key against its model list and limits before body goes to the
// pool: the release func to call when it ends, or the error the client gets.
func (g *Gateway) admit(ctx context.Context, pb poolBody) (*tally, usage.Record, func(), error) {
	spanModel(ctx, pb.model)
	t, _ := ctx.Value(tallyKey{}).(*tally)
	if t == nil {
		return nil, usage.Record{}, nil, nil
	}
	rec := usage.Record{Model: pb.model}
	if t.key == nil {
		return t, rec, func() {}, nil
	}
	rec.Key = t.key.Name
	if !t.key.AllowsModel(rec.Model) {
		return nil, rec, nil, &schemas.Error{Status: http.StatusForbidden, Code: CodeModelNotAllowed,
			Message: "the key " + t.key.Name + " may not use the model " + rec.Model}
	}
	release, err := g.cfg.Meter.Admit(ctx, t.key.Name, t.key.Limits)
	var le *usage.LimitError
	switch {
	case errors.As(err, &le):
		return nil, rec, nil, &schemas.Error{Status: http.StatusTooManyRequests, Code: CodeRateLimitExceeded,
			Message: "the key " + t.key.Name + " is over its limit " + le.Limit, RetryAfter: le.RetryAfter}
	case err != nil:
		g.log.Warn("limit state unavailable", "key", t.key.Name, "error", err)
		return nil, rec, nil, &schemas.Error{Status: http.StatusServiceUnavailable, Code: schemas.CodeUnavailable,
			Message: "the gateway cannot reach its limit state in JetStream", RetryAfter: time.Second}
	}
	return t, rec, release, nil
}

// modelOf reads a request body's model.
func modelOf(body []byte) string {
	ms, _ := jsonobj.Members(body)
	v, found := jsonobj.Field(body, ms, "model")
	var m string
	if found {
		_ = json.Unmarshal(v, &m)
	}
	return m
}

// generate is cl.Generate, admitted and metered.
func (g *Gateway) generate(ctx context.Context, pb poolBody, hdr nats.Header) (*client.Reply, error) {
	t, rec, release, err := g.admit(ctx, pb)
	if err != nil {
		return nil, err
	}
	meteredHere(t, hdr)
	reply, err := g.onStickyWorker(pb, hdr, func() bool { return false }, func(cl *client.Client) (*client.Reply, error) {
		return cl.Generate(ctx, pb.body, hdr)
	})
	if t != nil {
		release()
		if reply != nil {
			tokensOf(&rec, reply.Response)
			rec.Account = reply.Account
		}
		g.record(rec, err)
	}
	return reply, err
}

// record completes rec with how the request ended and hands it to the meter.
func (g *Gateway) record(rec usage.Record, err error) {
	if err != nil {
		rec.Error = string(fromPool(err, 0, 0).Code)
		if e, ok := schemas.AsError(err); ok && rec.Account == "" {
			rec.Account = e.Account
		}
	}
	g.cfg.Meter.Record(rec)
}

// tokensOf reads the usage of a response object into rec.
func tokensOf(rec *usage.Record, response []byte) {
	var r struct {
		Usage json.RawMessage `json:"usage"`
	}
	if len(response) != 0 && json.Unmarshal(response, &r) == nil {
		rec.SetTokens(r.Usage)
	}
}

// meteredHere tells the worker (header Codex-Metered) that this gateway records the request's
// usage, when it does (t non-nil), so the worker records none of its own.
func meteredHere(t *tally, hdr nats.Header) {
	if t != nil {
		hdr.Set(schemas.HeaderMetered, "gateway")
	}
}

// recordBackground records a finished background response's usage for the key reading it (ctx's
// tally), once per job whoever reads it how often: its tokens, or its error code. The submission
// was admitted against the key's limits; this is where its tokens reach the key's usage.
func (g *Gateway) recordBackground(ctx context.Context, id string, body []byte) {
	t, _ := ctx.Value(tallyKey{}).(*tally)
	if t == nil {
		return
	}
	rec := usage.Record{Model: modelOf(body)}
	if t.key != nil {
		rec.Key = t.key.Name
	}
	if e, isErr := schemas.ResultError(body); isErr {
		rec.Error = string(e.Code)
	} else {
		tokensOf(&rec, body)
	}
	g.cfg.Meter.RecordOnce("bg-"+id, rec)
}

// getUsage serves GET /v1/usage?by=key|account&since=24h to an admin key (or, without keys,
// to this machine): the usage report as JSON.
func (g *Gateway) getUsage(w http.ResponseWriter, r *http.Request, k *Key) outcome {
	fail := func(a *apiError) outcome { a.write(w); return failed(a) }
	if g.keys.now().keyed && (k == nil || !k.Admin) {
		return fail(newAPIError(http.StatusForbidden, CodeForbidden, "", "GET /v1/usage needs an admin key (admin: true in the keys file)"))
	}
	if g.cfg.Meter == nil {
		return fail(newAPIError(http.StatusServiceUnavailable, schemas.CodeUnavailable, "",
			"usage accounting is off: the gateway's NATS server has no JetStream"))
	}
	q := r.URL.Query()
	by := q.Get("by")
	if by == "" {
		by = usage.ByKey
	}
	if by != usage.ByKey && by != usage.ByAccount {
		return fail(newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, "by", `"by": must be key or account`))
	}
	since := 24 * time.Hour
	if s := q.Get("since"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fail(newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, "since", `"since": must be a positive duration such as 24h`))
		}
		since = d
	}
	rep, err := g.cfg.Meter.Query(r.Context(), time.Now().Add(-since), by)
	if err != nil && !errors.Is(err, usage.ErrNoUsage) {
		return fail(newAPIError(http.StatusServiceUnavailable, schemas.CodeUnavailable, "", "gateway: reading usage: "+err.Error()))
	}
	b, _ := json.Marshal(rep)
	writeJSON(w, http.StatusOK, b)
	return ok(http.StatusOK)
}
