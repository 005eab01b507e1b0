// Package gateway is the pool's HTTP front door: it serves the OpenAI Responses API over HTTP on
// top of queue/client, so the official OpenAI SDKs and the Codex CLI (as a custom model provider)
// use a codexpool pool unchanged. It keeps no state of its own, so several gateways can run behind
// a load balancer.
//
// Call [New] with a [client.Client], its NATS connection and a [Config], and serve the [Gateway]
// (an http.Handler) with [NewServer], after [CheckAddr] has vetted the address:
//
//	g := gateway.New(client.New(nc, client.Options{}), nc, gateway.Config{Keys: keys})
//	srv := gateway.NewServer(g)
//	srv.Serve(ln)
//
// # Routes
//
//   - POST /v1/responses: a request on the pool. With "stream": true in the body (the SDKs send
//     Accept: application/json even then) the answer is text/event-stream, one
//     "event: <type>\ndata: <event JSON>\n\n" frame per pool event, flushed as it comes, and
//     ": keep-alive" comments while the origin is silent; otherwise the one-shot JSON reply.
//     "background": true makes a durable job when Config.Jobs is set.
//   - GET /v1/responses with a WebSocket upgrade: Responses over WebSocket, as the Codex backend
//     speaks it (ws.go): response.create frames in, event frames out, one socket one session
//     (Codex-Session-Id), so previous_response_id with only the new items continues upstream.
//   - GET /v1/responses/{id}: a background response as it progresses, to the key that made it
//     only: any other key gets the 404 not_found of an id that does not exist.
//   - POST /v1/chat/completions: Chat Completions translated by package gateway/chat; JSON, or
//     "data: <chunk>" lines ending with "data: [DONE]".
//   - POST /v1/messages, POST /v1/messages/count_tokens: Anthropic Messages translated by package
//     gateway/anthropic (JSON or Anthropic SSE; keys as x-api-key or Bearer); count_tokens counts
//     locally and asks the pool nothing.
//   - GET /v1/models, GET /v1/models/{id}: Config.Models in the OpenAI list shape, or in
//     Anthropic's (with its keys and errors) to a caller that sends anthropic-version or x-api-key;
//     there a single model is also found when Config.ModelMap names it.
//   - GET /v1/usage: the usage report of Config.Meter (per key or account and hour), to an admin
//     key of Config.ClientKeys only (403 for others). Keys, limits and metering: docs/usage.md.
//   - GET /backend-api/wham/usage, GET /api/codex/usage: the pool's quota (Config.Quota) in the
//     origin's shape; POST replies under /v1/ carry it as x-codex-primary-* / x-codex-secondary-*.
//   - GET /healthz (the process is up), GET /readyz (NATS connected and a worker answers the
//     micro ping; the verdict is cached for Config.ReadyTTL). Neither needs a key.
//   - GET /dashboard, /dashboard/*: Config.Dashboard (package gateway/dashboard), to a key as
//     Bearer or as a Basic password; without keys, to loopback callers only.
//
// # What is changed on the way
//
// Top-level members whose value is null and "background": false are dropped from a request
// body (the Responses API treats them as absent; the pool refuses wrong-typed fields). Events and
// replies are forwarded byte for byte except for a top-level "error": null, which is removed
// (openai-go fails a stream on any event with a top-level "error" key), and origin "error"
// events, which are replaced by the pool's error that follows them.
//
// # Errors
//
// An error before any event is answered with the contract error's HTTP status and the OpenAI
// shape {"error": {"message", "type", "code", "param"}}: code is the contract code, param the
// field a 400 names. Retry times go out as retry-after and retry-after-ms; worker_busy carries
// x-should-retry: true and a long (or unknown) rate-limit wait x-should-retry: false, so the SDKs
// retry the one and not the other. No responders from NATS is 503 unavailable, and so is a NATS
// connection that stays down for Config.UnavailableWait (5 s) while a request waits for it, with
// retry-after: a request that arrives meanwhile, or is in flight when it drops, is not held for
// its timeout. An error after
// the stream began is one SSE "error" event both SDKs raise on, and the stream ends. Every
// response carries x-request-id, which is also the pool request's Codex-Request-Id. The gateway
// always makes its own ("gw-" and a UUID): a client cannot name, and so cancel, another client's
// request.
//
// # Trust boundaries
//
// The request id is also the id of a background response (the job id), and it carries its
// owner: the UUID's second half is a tag of the first and of the SHA-256 digest of the client key
// (never the key itself; see owner.go). A GET with another key computes another tag and is
// answered 404 without asking the job store, so a job's existence does not leak.
//
// Without keys the gateway trusts whoever reaches it, so it serves /v1/* only to requests made
// on this machine on purpose: a Host that is not a loopback name (localhost, 127.0.0.0/8, [::1],
// with or without a port) is 421 misdirected_request (DNS rebinding), an Origin header that is
// not an http(s) loopback origin is 403 forbidden_origin (a web page's fetch or form post), and a
// POST body whose Content-Type is not application/json is 415 unsupported_media_type (what a
// cross-site request can send without a CORS preflight). With keys none of these is checked:
// a browser cannot send a page's request with the Authorization header, and clients that post
// JSON without the header (curl -d) keep working.
//
// A stream's every write (event or keep-alive) must be taken by the client within
// Config.WriteTimeout (30 s): a client that stops reading is cut off, and its pool request
// cancelled as for a disconnect, so it does not hold a worker's slot.
//
// # Cancellation
//
// A client that disconnects ends its request's context, which ends the pool request (the Go
// client publishes its Codex-Request-Id on codex.cancel).
package gateway
