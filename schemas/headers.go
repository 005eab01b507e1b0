package schemas

// NATS message headers of the contract.
const (
	HeaderTimeout   = "Codex-Timeout"    // request: Go duration bounding the work
	HeaderRequestID = "Codex-Request-Id" // request and reply: correlation id
	HeaderWorker    = "Codex-Worker"     // reply: id of the worker that answered
	HeaderSeq       = "Codex-Seq"        // streamed reply: 1, 2, 3, ...
	// HeaderHops counts how often a worker handed a request back to the queue group
	// because it was full or shutting down (see queue).
	HeaderHops = "Codex-Hops"

	// NATS micro error headers.
	HeaderServiceError     = "Nats-Service-Error"
	HeaderServiceErrorCode = "Nats-Service-Error-Code"
)
