package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// StatusOverloaded is Anthropic's status for an overloaded origin.
const StatusOverloaded = 529

// Error is an answer in Anthropic's error shape {"type":"error","error":{"type","message"}}.
type Error struct {
	Status     int
	Type       string // authentication_error, rate_limit_error, ...
	Message    string
	RetryAfter time.Duration // sent as retry-after when > 0
}

func (e *Error) Error() string { return "anthropic: " + e.Message }

// badRequest is a 400 invalid_request_error.
func badRequest(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: msg}
}

// FromStatus makes the Anthropic error for a pool answer: status is its HTTP status,
// upstreamCode the origin's own code when known. A context overflow at the origin is 413
// request_too_large (Claude Code compacts on it), an overloaded origin 529 overloaded_error.
func FromStatus(status int, upstreamCode, msg string, retryAfter time.Duration) *Error {
	switch {
	case isContextOverflow(upstreamCode, msg):
		status = http.StatusRequestEntityTooLarge
	case isOverload(status, upstreamCode, msg):
		status = StatusOverloaded
	}
	return &Error{Status: status, Type: errorType(status), Message: msg, RetryAfter: retryAfter}
}

func isContextOverflow(code, msg string) bool {
	return code == "context_length_exceeded" || strings.Contains(msg, "context_length_exceeded") ||
		strings.Contains(msg, "exceeds the context window")
}

func isOverload(status int, code, msg string) bool {
	switch code {
	case "server_is_overloaded", "slow_down", "service_unavailable_error":
		return true
	}
	return status == http.StatusServiceUnavailable || strings.Contains(msg, "server_is_overloaded") ||
		strings.Contains(msg, "at capacity")
}

// errorType is Anthropic's error.type for status.
func errorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case StatusOverloaded:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

type errorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type errorJSON struct {
	Type  string      `json:"type"`
	Error errorDetail `json:"error"`
}

// Body returns {"type":"error","error":{"type","message"}}.
func (e *Error) Body() []byte {
	b, _ := json.Marshal(errorJSON{Type: "error", Error: errorDetail{Type: e.Type, Message: e.Message}})
	return b
}

// Frame returns the "event: error" frame that ends a stream which has begun.
func (e *Error) Frame() Frame { return Frame{Event: "error", Data: e.Body()} }
