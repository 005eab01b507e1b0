package codextest

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// A refusal is an HTTP error answer to an upgrade or a streaming request, with the JSON error
// body {"error":{"message":...,"type":...,"code":...}}.
type refusal struct {
	status     int           // 0 = none
	retryAfter time.Duration // sent as Retry-After, whole seconds rounded up; 0 = none
	code, msg  string        // "" = rejectText(status)
}

// requestKind is what a refusal answers, for the counters it moves.
type requestKind uint8

const (
	onUpgrade requestKind = iota // a WebSocket upgrade
	onStream                     // an HTTP streaming request
)

// refuse answers a request of kind with rf and counts it, against acct too (nil = none; an
// upgrade authenticated as acct).
func (s *Server) refuse(w http.ResponseWriter, kind requestKind, acct *account, rf refusal) {
	if rf.status == http.StatusUnauthorized {
		s.c.unauthorized.Add(1)
	}
	switch kind {
	case onUpgrade:
		s.c.upgradesRejected.Add(1)
		switch rf.status {
		case http.StatusForbidden:
			s.c.rejected403.Add(1)
		case http.StatusUpgradeRequired:
			s.c.upgrades426.Add(1)
		}
		if acct != nil {
			acct.c.rejected.Add(1)
			if rf.status == http.StatusForbidden {
				acct.c.rejected403.Add(1)
			}
		}
		s.logf("codextest: upgrade rejected with %d", rf.status)
	case onStream:
		s.c.httpRejected.Add(1)
		s.logf("codextest: HTTP request refused with %d", rf.status)
	}
	if rf.code == "" {
		rf.code, rf.msg = rejectText(rf.status)
	}
	writeError(w, rf.status, rf.retryAfter, rf.code, rf.msg)
}

func rejectText(status int) (code, msg string) {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_api_key", "Your authentication token is invalid or expired (simulated)."
	case status == http.StatusForbidden:
		return "forbidden", "Forbidden (simulated)."
	case status == http.StatusUpgradeRequired:
		return "upgrade_required", "WebSockets are not available for this account (simulated)."
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded", "Rate limit reached (simulated)."
	case status >= 500:
		return "server_error", "The server had an error (simulated)."
	}
	return "error", http.StatusText(status) + " (simulated)."
}

// errorType is the "type" of the OpenAI error body for status.
func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	}
	return "invalid_request_error"
}

// writeError writes the JSON error body of status, code and msg.
func writeError(w http.ResponseWriter, status int, retryAfter time.Duration, code, msg string) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(retryAfter.Seconds())), 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	body.Error.Message, body.Error.Type, body.Error.Code = msg, errorType(status), code
	_ = json.NewEncoder(w).Encode(&body)
}

// writeErrorBody writes {"error": body} with status, and Retry-After in whole seconds (rounded
// down: body's resets_in_seconds already is) when retryAfter > 0.
func writeErrorBody(w http.ResponseWriter, status int, retryAfter time.Duration, body errorBody) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(retryAfter/time.Second), 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error errorBody `json:"error"`
	}{body})
}
