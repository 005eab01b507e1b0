// Package queue is the worker's NATS side: an embedded NATS server, a resilient connection, and
// the "codexpool" micro service that turns requests on codex.generate into generations, with
// hand-backs, streamed replies and graceful shutdown. The Go client that sends requests is
// package queue/client, which links none of this.
//
// A worker calls [StartEmbedded] (only when it runs without an external NATS server), then
// [Connect], then [OpenJobs] (only when it consumes durable jobs; it may wait for JetStream, under
// the caller's context), then [NewService] with a [Generator] (and the jobs in Config.Jobs), and
// [Service.Shutdown] when it is told to stop.
//
// # Admission
//
// Every request and every job passes one check before it may run: its reply subject (or
// Codex-Reply-To) must start with one of Config.ReplyPrefixes (default _INBOX.), else it is
// neither generated nor answered, only counted; then its size, its Codex-Timeout header and its
// JSON, each refused with the contract's error. Requests and jobs share MaxInflight slots; the jobs
// pull loop waits for a job in a slot that a request may take from it.
//
// # Requests and replies
//
// Every worker subscribes to the subject (default codex.generate) in one queue group (default
// codexpool), so NATS hands each request to exactly one worker. The micro handler only checks a
// request (size, Codex-Timeout header, JSON) and takes an in-flight slot; the generation itself runs
// in its own goroutine, so one slow generation never holds up the next request. A one-shot reply is
// one message; a streamed reply is one message per upstream event with a Codex-Seq header, an error
// message if the generation failed, and always an empty-payload sentinel last. Errors follow the NATS
// micro convention: Nats-Service-Error-Code and Nats-Service-Error headers and a JSON error body.
//
// Every worker also serves its own subject, <subject>.worker.<worker id> (micro endpoint
// "worker", see session.go): the later turns of a session (Codex-Session-Id) go there, to the
// worker that owns it; client.Session does this.
//
// # A full worker: forward with a hop limit, then a fast 429
//
// NATS queue groups do not know how busy a member is: they pick one at random. A worker whose
// MaxInflight slots are all taken therefore must not queue the request (it would hoard work while
// other workers idle) and must not drop it. Instead it hands the message back to the queue group:
// it republishes it unchanged to the same subject with the same reply subject and a Codex-Hops header
// one higher, so NATS gives it to a random member again, usually a free one; the reply goes straight
// from that worker to the client. A request that has already been handed back MaxHops times (default
// 2) is answered at once with 429 worker_busy, which the Go client retries with
// jittered backoff. So a pool with free capacity absorbs a full worker's excess at the cost of a
// republish, and a pool that is full everywhere answers within milliseconds instead of letting
// requests time out. The same holds for a request the Generator, when it is an Admitter, has no
// room for (a worker owning as many sessions as it may, all in a turn): it is handed back, and
// after MaxHops answered with the Admitter's 429 worker_busy and its retry time.
//
// A worker that is shutting down treats new arrivals the same way (it first stops its subscription,
// so only messages already on their way reach it), with 503 unavailable instead of 429. When no other
// worker is subscribed, the NATS server does not tell the client (it sends its no-responders status
// only to the publisher of a message, here the forwarding worker), so a draining worker checks each
// hand-back and answers 503 unavailable itself when nobody took the request.
//
// # Shared credentials
//
// [NewCredentialStore] binds a JetStream key-value bucket (CODEXPOOL_CREDENTIALS) where workers
// share the Codex logins they read from auth files: it implements the worker's
// login.Coordinator with compare-and-set writes and watches, and knows nothing of tokens (keys
// are hashes, values are always sealed by the worker).
//
// # Stats
//
// micro runs one handler at a time per endpoint and its num_requests/num_errors count only what the
// handler does synchronously (requests and refusals), not the generations that run afterwards. The
// true numbers (in flight, completed, errors by code, forwarded, no_reply, latency) are in [Stats],
// published as the endpoint's data in `nats micro stats codexpool`.
package queue
