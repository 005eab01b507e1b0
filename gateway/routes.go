package gateway

import (
	"context"
	"net/http"
	"strings"
)

// The gateway's routes: method-and-path patterns on one http.ServeMux, each with the guard of its
// API (who may call it, and in which error shape a refusal is written), checked in one place.
// ServeHTTP (gateway.go) identifies the caller and writes the request's log line around them.

// handler is a route: it answers and says what it answered, for the log line.
type handler func(w http.ResponseWriter, r *http.Request, c call) outcome

// guard is who may call a route.
type guard int

const (
	guardNone      guard = iota // health, the dashboard (which checks its own key)
	guardOpenAI                 // a client key (or loopback without keys); OpenAI's error shape
	guardAnthropic              // the same, with x-api-key accepted; Anthropic's error shape
)

// exchange carries the caller to a route and its outcome back through the mux.
type exchange struct {
	c call
	o outcome
}

type exchangeKey struct{}

// routes builds the mux.
func (g *Gateway) routes() *http.ServeMux {
	mux := http.NewServeMux()
	h := func(pattern string, gd guard, fn handler) { mux.Handle(pattern, g.route(gd, fn)) }
	notFound := func(w http.ResponseWriter, r *http.Request, _ call) outcome { return g.notFound(w, r) }
	only := func(method string) handler {
		return func(w http.ResponseWriter, r *http.Request, _ call) outcome { return g.methodNotAllowed(w, r, method) }
	}

	h("/", guardNone, notFound)
	h("/healthz", guardNone, func(w http.ResponseWriter, r *http.Request, _ call) outcome { return g.healthz(w, r) })
	h("/readyz", guardNone, func(w http.ResponseWriter, r *http.Request, _ call) outcome { return g.readyz(w, r) })
	h("/dashboard", guardNone, func(w http.ResponseWriter, r *http.Request, _ call) outcome { return g.dashboard(w, r) })
	h("/dashboard/", guardNone, func(w http.ResponseWriter, r *http.Request, _ call) outcome { return g.dashboard(w, r) })
	for _, p := range []string{"/backend-api/wham/usage", "/api/codex/usage"} {
		h(p, guardOpenAI, func(w http.ResponseWriter, r *http.Request, _ call) outcome { return g.getQuota(w, r) })
	}

	h("/v1/", guardOpenAI, notFound)
	h("POST /v1/responses", guardOpenAI, func(w http.ResponseWriter, r *http.Request, c call) outcome { return g.createResponse(w, r, c.id) })
	h("GET /v1/responses", guardOpenAI, g.responsesSocket)
	h("/v1/responses", guardOpenAI, only(http.MethodPost))
	h("POST /v1/responses/compact", guardOpenAI, func(w http.ResponseWriter, r *http.Request, c call) outcome { return g.compactResponses(w, r, c.id) })
	h("GET /v1/responses/{id...}", guardOpenAI, func(w http.ResponseWriter, r *http.Request, c call) outcome {
		return g.getResponse(w, r, c.owner, r.PathValue("id"))
	})
	h("/v1/responses/", guardOpenAI, only(http.MethodGet))
	h("POST /v1/chat/completions", guardOpenAI, func(w http.ResponseWriter, r *http.Request, c call) outcome { return g.chatCompletions(w, r, c.id) })
	h("/v1/chat/completions", guardOpenAI, only(http.MethodPost))
	h("GET /v1/usage", guardOpenAI, func(w http.ResponseWriter, r *http.Request, c call) outcome { return g.getUsage(w, r, c.key) })
	h("/v1/usage", guardOpenAI, only(http.MethodGet))
	h("/v1/models", guardOpenAI, g.listModels)
	h("/v1/models/", guardOpenAI, g.listModels)

	h("POST /v1/messages", guardAnthropic, func(w http.ResponseWriter, r *http.Request, c call) outcome { return g.createMessage(w, r, c.id) })
	h("POST /v1/messages/count_tokens", guardAnthropic, func(w http.ResponseWriter, r *http.Request, c call) outcome { return g.countTokens(w, r, c.id) })
	h("/v1/messages", guardAnthropic, g.messagesMethod)
	h("/v1/messages/count_tokens", guardAnthropic, g.messagesMethod)
	h("/v1/messages/", guardAnthropic, func(w http.ResponseWriter, r *http.Request, _ call) outcome {
		return g.messageError(w, newAPIError(http.StatusNotFound, CodeNotFound, "", "gateway: no route for "+r.Method+" "+r.URL.Path))
	})
	return mux
}

// route wraps fn in its guard: the one place a route's caller is checked.
func (g *Gateway) route(gd guard, fn handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := r.Context().Value(exchangeKey{}).(*exchange)
		nameSpan(r)
		if gd == guardOpenAI && speaksAnthropic(r) && isModels(r.URL.Path) {
			gd = guardAnthropic // the same models in Anthropic's shape
		}
		if gd != guardNone {
			g.sendQuota(w, r, x.c)
		}
		if a := g.refuse(gd, r, x.c); a != nil {
			if gd == guardAnthropic {
				x.o = g.messageError(w, a)
				return
			}
			a.write(w)
			x.o = failed(a)
			return
		}
		x.o = fn(w, r, x.c)
	})
}

// refuse is why gd does not let r's caller in: not loopback on a gateway without keys, or no
// key it knows; nil lets it through.
func (g *Gateway) refuse(gd guard, r *http.Request, c call) *apiError {
	switch {
	case gd == guardNone:
		return nil
	case !g.keys.now().keyed:
		return localOnly(r)
	case c.authed:
		return nil
	case gd == guardAnthropic:
		return newAPIError(http.StatusUnauthorized, CodeInvalidAPIKey, "",
			"missing or unknown API key: send x-api-key: <key> or Authorization: Bearer <key> with one of the gateway's keys")
	}
	return newAPIError(http.StatusUnauthorized, CodeInvalidAPIKey, "",
		"missing or unknown API key: send Authorization: Bearer <key> with one of the gateway's keys")
}

// serveRoute runs r through the mux with c, and returns what the route answered.
func (g *Gateway) serveRoute(w http.ResponseWriter, r *http.Request, c call) outcome {
	x := &exchange{c: c}
	g.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x)))
	if x.o.status == 0 { // the mux answered itself (a redirect to the clean path)
		x.o = ok(http.StatusMovedPermanently)
	}
	return x.o
}

func isModels(p string) bool { return p == "/v1/models" || strings.HasPrefix(p, "/v1/models/") }

// responsesSocket serves GET /v1/responses: the Codex CLI's WebSocket (ws.go), else a 405.
func (g *Gateway) responsesSocket(w http.ResponseWriter, r *http.Request, c call) outcome {
	if !isWebSocket(r) {
		return g.methodNotAllowed(w, r, http.MethodPost)
	}
	return g.serveWS(w, r, c)
}

// listModels serves GET /v1/models and /v1/models/{id}, in Anthropic's shape to an Anthropic client.
func (g *Gateway) listModels(w http.ResponseWriter, r *http.Request, c call) outcome {
	if speaksAnthropic(r) {
		return g.anthropicModels(w, r)
	}
	if r.Method != http.MethodGet {
		return g.methodNotAllowed(w, r, http.MethodGet)
	}
	if id, one := cutModels(r.URL.Path); one {
		return g.getModel(w, id)
	}
	writeJSON(w, http.StatusOK, g.models)
	return ok(http.StatusOK)
}

func cutModels(p string) (string, bool) { return strings.CutPrefix(p, "/v1/models/") }

// messagesMethod answers a Messages route asked with another method than POST.
func (g *Gateway) messagesMethod(w http.ResponseWriter, r *http.Request, _ call) outcome {
	w.Header().Set("Allow", http.MethodPost)
	return g.messageError(w, newAPIError(http.StatusMethodNotAllowed, CodeMethod, "", "gateway: "+r.URL.Path+" takes POST, not "+r.Method))
}
