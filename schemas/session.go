package schemas

import (
	"encoding/json"
	"strings"
)

// Sessions (the contract's "Sessions"): a request with HeaderSessionID belongs to a session. The
// worker that serves its first turn owns it and answers with HeaderWorker; later turns, which
// may continue the previous response with previous_response_id and only the new items, go to
// that worker's own subject, WorkerSubject(subject, worker).
const (
	// HeaderSessionID names the session a request belongs to (any string up to
	// MaxSessionIDBytes).
	HeaderSessionID = "Codex-Session-Id"
	// MaxSessionIDBytes bounds a session id.
	MaxSessionIDBytes = 256
	// WorkerEndpointName is the micro endpoint of each worker's own subject.
	WorkerEndpointName = "worker"
)

// WorkerSubject returns the subject on which only worker workerID serves: subject (the queue
// subject, e.g. codex.generate) + ".worker." + workerID.
func WorkerSubject(subject, workerID string) string { return subject + ".worker." + workerID }

// ValidWorkerID reports whether id can end a subject: non-empty, no whitespace, no wildcard, no
// empty token.
func ValidWorkerID(id string) bool {
	if id == "" || strings.ContainsAny(id, " \t\r\n*>") {
		return false
	}
	for tok := range strings.SplitSeq(id, ".") {
		if tok == "" {
			return false
		}
	}
	return true
}

// PreviousResponseID returns the request's previous_response_id, "" when it has none.
func (r *Request) PreviousResponseID() string {
	if r == nil {
		return ""
	}
	var id string
	_ = json.Unmarshal(r.fields["previous_response_id"], &id)
	return id
}
