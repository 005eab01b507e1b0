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

// The session headers a request may carry for sticky routing: requests that share a session go
// to the same account, so the account's prompt cache serves them. The gateway forwards them from
// HTTP to NATS under the same names.
const (
	HeaderClaudeSession = "X-Claude-Code-Session-Id" // Claude Code's conversation
	HeaderClaudeAgent   = "X-Claude-Code-Agent-Id"   // one agent of that conversation (sub-agents differ)
	HeaderStickySession = "session_id"               // the Codex CLI's conversation
)

// SessionHeaders are the header names SessionKey reads, for forwarding.
var SessionHeaders = []string{HeaderClaudeSession, HeaderClaudeAgent, HeaderStickySession}

// SessionKey returns the sticky-routing key of a request from its headers (get returns a
// header's value, "" when absent): X-Claude-Code-Session-Id with its X-Claude-Code-Agent-Id
// (each agent of a session sticks on its own), else session_id; "" when neither is set, and the
// worker falls back to the body's prompt_cache_key. The key is opaque: the worker hashes it
// before it stores it anywhere.
func SessionKey(get func(string) string) string {
	if s := get(HeaderClaudeSession); s != "" {
		return "claude\x00" + s + "\x00" + get(HeaderClaudeAgent)
	}
	if s := get(HeaderStickySession); s != "" {
		return "session\x00" + s
	}
	return ""
}
