package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Code is a machine-readable error code of the contract. Clients branch on it.
type Code string

// The error codes of the contract: every error reply carries one, with the status paired here.
const (
	CodeInvalidRequest       Code = "invalid_request"       // 400: the request is refused
	CodeRequestTooLarge      Code = "request_too_large"     // 413: payload too large
	CodeUpstreamUnauthorized Code = "upstream_unauthorized" // 401: the origin refused the credentials
	CodeOriginForbidden      Code = "origin_forbidden"      // 403: upgrade rejected, also after the retry
	CodeUpstreamRateLimited  Code = "upstream_rate_limited" // 429: origin rate or usage limit
	CodeWorkerBusy           Code = "worker_busy"           // 429: this worker is full
	CodeUpstreamError        Code = "upstream_error"        // 502: failed/incomplete/error event/drop/bad event
	CodeUnavailable          Code = "unavailable"           // 503: the worker is shutting down
	CodeUpstreamTimeout      Code = "upstream_timeout"      // 504: connect, first event, idle or deadline
	CodeCancelled            Code = "cancelled"             // 499: cancelled on codex.cancel
	// CodePreviousResponseNotFound (400): previous_response_id names a response this session's
	// socket does not have (its owner is gone, or another worker got the request): resend the
	// whole conversation.
	CodePreviousResponseNotFound Code = "previous_response_not_found"
)

// StatusCancelled is the status of CodeCancelled (nginx's "client closed request").
const StatusCancelled = 499

// ErrCancelled is the cause (context.Cause) of a generation's context when the request was
// cancelled on the cancel subject: the worker and its logs tell it from a shutdown or a deadline.
var ErrCancelled = errors.New("cancelled on request")

// Codes returns every error code of the contract, in the order of its table.
func Codes() []Code {
	return []Code{
		CodeInvalidRequest, CodeRequestTooLarge, CodeUpstreamUnauthorized, CodeOriginForbidden,
		CodeUpstreamRateLimited, CodeWorkerBusy, CodeUpstreamError, CodeUnavailable, CodeUpstreamTimeout,
		CodeCancelled, CodePreviousResponseNotFound,
	}
}

// Status returns the HTTP-style status the contract pairs with c (502 for unknown codes).
func (c Code) Status() int {
	switch c {
	case CodeInvalidRequest, CodePreviousResponseNotFound:
		return http.StatusBadRequest
	case CodeRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUpstreamUnauthorized:
		return http.StatusUnauthorized
	case CodeOriginForbidden:
		return http.StatusForbidden
	case CodeUpstreamRateLimited, CodeWorkerBusy:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeUpstreamTimeout:
		return http.StatusGatewayTimeout
	case CodeCancelled:
		return StatusCancelled
	default:
		return http.StatusBadGateway
	}
}

// Error is the typed error every codexpool layer returns and every client receives.
// It is the Go form of error.schema.json.
type Error struct {
	Status     int           // HTTP-style status, e.g. 429
	Code       Code          // contract code, e.g. CodeUpstreamRateLimited
	Message    string        // human-readable; never holds a secret
	RetryAfter time.Duration // when known; 0 otherwise
	// UpstreamCode is the origin's own error code when the error came from the origin
	// (e.g. "server_error", "usage_limit_reached"); empty otherwise.
	UpstreamCode string
	// Account is the name of the worker's account that answered (or, when every account is
	// cooling down, the one usable first); empty when no account was involved. It is a name
	// from the worker's configuration, never a credential.
	Account string
}

// Errorf returns an *Error with code, the code's status and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Status: code.Status(), Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.UpstreamCode != "" {
		return fmt.Sprintf("%d %s (%s): %s", e.Status, e.Code, e.UpstreamCode, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// AsError reports whether err is or wraps an *Error, and returns it.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// ErrorBody is the JSON body of an error reply: {"error": {...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the object inside ErrorBody.
type ErrorDetail struct {
	Code         Code   `json:"code"`
	Message      string `json:"message"`
	Status       int    `json:"status"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	UpstreamCode string `json:"upstream_code,omitempty"`
	Account      string `json:"account,omitempty"`
}

// Body returns the JSON error body of the contract for e.
func (e *Error) Body() []byte {
	d := ErrorDetail{Code: e.Code, Message: e.Message, Status: e.Status, UpstreamCode: e.UpstreamCode, Account: e.Account}
	if e.RetryAfter > 0 {
		d.RetryAfterMS = e.RetryAfter.Milliseconds()
		if d.RetryAfterMS == 0 {
			d.RetryAfterMS = 1
		}
	}
	b, _ := json.Marshal(ErrorBody{Error: d})
	return b
}

// ParseErrorBody decodes an error reply body into an *Error.
func ParseErrorBody(body []byte) (*Error, error) {
	var b ErrorBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("schemas: decode error body: %w", err)
	}
	if b.Error.Code == "" {
		return nil, errors.New("schemas: error body has no code")
	}
	e := &Error{Status: b.Error.Status, Code: b.Error.Code, Message: b.Error.Message,
		RetryAfter: time.Duration(b.Error.RetryAfterMS) * time.Millisecond, UpstreamCode: b.Error.UpstreamCode,
		Account: b.Error.Account}
	if e.Status == 0 {
		e.Status = e.Code.Status()
	}
	return e, nil
}

// ResultError reports whether body, a stored job result or any reply body, is an error body
// ({"error": {...}} and nothing else) and returns the error. A response object, whose "error"
// field is null or sits beside "id" and "output", is not one.
func ResultError(body []byte) (*Error, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || len(top) != 1 {
		return nil, false
	}
	raw, ok := top["error"]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	e, err := ParseErrorBody(body)
	if err != nil {
		return nil, false
	}
	return e, true
}
