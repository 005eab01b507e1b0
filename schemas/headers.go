package schemas

// NATS message headers of the contract.
const (
	HeaderTimeout   = "Codex-Timeout"    // request: Go duration bounding the work
	HeaderRequestID = "Codex-Request-Id" // request and reply: correlation id
	HeaderWorker    = "Codex-Worker"     // reply: id of the worker that answered
	HeaderSeq       = "Codex-Seq"        // streamed reply: 1, 2, 3, ...
	HeaderAccount   = "Codex-Account"    // reply: name of the worker's account that served it
	// HeaderMetered on a request says a gateway records its usage (per key and account), so the
	// worker does not record it again (see Request.Metered).
	HeaderMetered = "Codex-Metered"
	// HeaderHops counts how often a worker handed a request back to the queue group
	// because it was full or shutting down (see queue).
	HeaderHops = "Codex-Hops"

	// HeaderReplyTo on a job names a core subject that also gets its reply (or its stream).
	HeaderReplyTo = "Codex-Reply-To"
	// HeaderJobID on the messages a job publishes to its Codex-Reply-To names the job.
	HeaderJobID = "Codex-Job-Id"
	// HeaderMsgID is JetStream's de-duplication header; on a job it is the job id.
	HeaderMsgID = "Nats-Msg-Id"

	// NATS micro error headers.
	HeaderServiceError     = "Nats-Service-Error"
	HeaderServiceErrorCode = "Nats-Service-Error-Code"
)
