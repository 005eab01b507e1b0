package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
)

// Codes the gateway answers with itself, next to the contract's (schemas.Code): the OpenAI API's
// own code for a bad key, and what the pool's codes do not cover.
const (
	CodeInvalidAPIKey schemas.Code = "invalid_api_key" // 401: missing or unknown client key
	CodeNotFound      schemas.Code = "not_found"       // 404: no such path, model or response
	CodeMethod        schemas.Code = "method_not_allowed"
	// CodeClientClosed is only logged: the client went away before the answer (nginx's 499).
	CodeClientClosed schemas.Code = "client_closed"
)

// StatusClientClosed is the status logged for a request whose client disconnected.
const StatusClientClosed = 499

// apiError is the OpenAI error object: {"error": {"message", "type", "code", "param"}}. The SDKs
// read message, type, code and param from it; status and retry headers come with it.
type apiError struct {
	Status     int
	Type       string
	Code       schemas.Code
	Message    string
	Param      string        // the request field at fault, "" for none (sent as null)
	RetryAfter time.Duration // sent as retry-after and retry-after-ms when > 0
	// ShouldRetry is sent as x-should-retry when set: the SDKs obey it over their status rules.
	ShouldRetry *bool
	// UpstreamCode is the origin's own code (e.g. usage_limit_reached), kept for logs.
	UpstreamCode string
}

// openAIType returns the OpenAI error type the SDKs and their users expect for status.
func openAIType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == StatusClientClosed:
		return "cancelled"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func newAPIError(status int, code schemas.Code, param, msg string) *apiError {
	return &apiError{Status: status, Type: openAIType(status), Code: code, Message: msg, Param: param}
}

func boolPtr(b bool) *bool { return &b }

// fromPool maps what the Go client returned to the OpenAI error. longWait is Config.LongWait.
func fromPool(err error, timeout time.Duration, longWait time.Duration) *apiError {
	if e, ok := schemas.AsError(err); ok {
		a := &apiError{Status: e.Status, Type: openAIType(e.Status), Code: e.Code, Message: e.Message,
			RetryAfter: e.RetryAfter, UpstreamCode: e.UpstreamCode}
		if a.Status == 0 {
			a.Status = e.Code.Status()
			a.Type = openAIType(a.Status)
		}
		if a.Status == http.StatusBadRequest {
			a.Param = paramOf(e.Message)
		}
		if e.UpstreamCode == string(codeContextLength) {
			// However the origin said it (a 400, or response.failed, which the worker reports as a
			// 502): OpenAI's own answer, which clients read to trim their history, not to retry.
			a.Status, a.Type, a.Code, a.Param = http.StatusBadRequest, openAIType(http.StatusBadRequest), codeContextLength, "input"
		}
		switch e.Code {
		case schemas.CodeWorkerBusy:
			// Every worker was full a moment ago: trying again soon is the point.
			a.ShouldRetry = boolPtr(true)
		case schemas.CodeUpstreamRateLimited:
			// The SDKs retry 429s within seconds (openai-node ignores a retry-after over 60 s and
			// backs off its own way), which against a usage limit resetting in minutes only
			// spends requests: tell them not to.
			if e.RetryAfter <= 0 || e.RetryAfter > longWait {
				a.ShouldRetry = boolPtr(false)
			}
		}
		return a
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: schemas.CodeUnavailable,
			Message: "no codexpool worker is serving requests right now (NATS has no responders)"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return &apiError{Status: http.StatusGatewayTimeout, Type: "server_error", Code: schemas.CodeUpstreamTimeout,
			Message:     "the gateway's request timeout (" + timeout.String() + ") passed before the pool answered",
			ShouldRetry: boolPtr(false)}
	case errors.Is(err, context.Canceled):
		return &apiError{Status: StatusClientClosed, Type: "cancelled", Code: CodeClientClosed, Message: "the client closed the request"}
	case errors.Is(err, nats.ErrMaxPayload):
		return newAPIError(http.StatusRequestEntityTooLarge, schemas.CodeRequestTooLarge, "", "the request is larger than the NATS server's max payload")
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return newAPIError(http.StatusServiceUnavailable, schemas.CodeUnavailable, "", "the gateway is not connected to NATS")
	}
	return newAPIError(http.StatusBadGateway, schemas.CodeUpstreamError, "", "gateway: "+err.Error())
}

// paramOf returns the field a pool refusal names: its messages start with the quoted field,
// e.g. `"input": must be a non-empty string ...` or `"metadata.a": must be a string`.
func paramOf(msg string) string {
	if !strings.HasPrefix(msg, `"`) {
		return ""
	}
	end := strings.Index(msg, `": `)
	if end < 0 {
		return ""
	}
	p, err := strconv.Unquote(msg[:end+1])
	if err != nil {
		return ""
	}
	return p
}

// detail is the JSON of the OpenAI error object.
type detail struct {
	Message string       `json:"message"`
	Type    string       `json:"type"`
	Code    schemas.Code `json:"code"`
	Param   *string      `json:"param"`
}

func (a *apiError) detail() detail {
	d := detail{Message: a.Message, Type: a.Type, Code: a.Code}
	if a.Param != "" {
		d.Param = &a.Param
	}
	return d
}

// body returns {"error": {...}}.
func (a *apiError) body() []byte {
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{a.detail()})
	return b
}

// streamFrame returns the data of the SSE "error" event that ends a stream which has begun: the
// Responses API's error event (type, code, message, param) with the error object beside it, which
// is what both SDKs raise on (openai-go fails on any event with a top-level "error", openai-node
// throws APIError(data.error) for an "error" event).
func (a *apiError) streamFrame() []byte {
	d := a.detail()
	b, _ := json.Marshal(struct {
		Type    string       `json:"type"`
		Code    schemas.Code `json:"code"`
		Message string       `json:"message"`
		Param   *string      `json:"param"`
		Error   detail       `json:"error"`
	}{"error", d.Code, d.Message, d.Param, d})
	return b
}

// writeHeaders sets the retry headers of a.
func (a *apiError) writeHeaders(h http.Header) {
	if a.RetryAfter > 0 {
		ms := max(a.RetryAfter.Milliseconds(), 1)
		h.Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
		h.Set("Retry-After-Ms", strconv.FormatInt(ms, 10))
	}
	if a.ShouldRetry != nil {
		h.Set("X-Should-Retry", strconv.FormatBool(*a.ShouldRetry))
	}
}

// write answers the request with a. A client that is gone gets nothing.
func (a *apiError) write(w http.ResponseWriter) {
	if a.Status == StatusClientClosed {
		return
	}
	h := w.Header()
	a.writeHeaders(h)
	if a.Status == http.StatusUnauthorized && a.Code == CodeInvalidAPIKey {
		h.Set("WWW-Authenticate", `Bearer realm="codexpool"`)
	}
	writeJSON(w, a.Status, a.body())
}

// writeJSON writes a JSON body with its length.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
