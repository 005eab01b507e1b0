package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/codexpool/codexpool/internal/origintext"
	"github.com/codexpool/codexpool/schemas"
)

// Event types the client acts on.
const (
	typeCompleted  = "response.completed"
	typeFailed     = "response.failed"
	typeIncomplete = "response.incomplete"
	typeError      = "error"
	typeRateLimits = "codex.rate_limits"

	// codeConnLimit is the error the origin sends before it ends a socket at its maximum age.
	codeConnLimit = "websocket_connection_limit_reached"
)

// Event is one upstream event.
type Event struct {
	Type string // the event's "type", e.g. "response.output_text.delta"
	Data []byte // the frame exactly as received; the callee may keep it
}

// errNotObject is eventType's error for a frame that is valid JSON but not an object (e.g. null).
var errNotObject = errors.New("codex: event is not a JSON object")

// eventType returns the "type" of an event frame ("" when it has none: such events are passed on
// like unknown types), or an error when the frame is not a JSON object or its type is not a string.
func eventType(data []byte) (string, error) {
	// json.Unmarshal accepts null for a struct: that is not an event.
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return "", errNotObject
	}
	// Fast path, taken by every event the origin sends: "type" is the first key and its value
	// has no escapes. json.Valid checks the whole frame without allocating; the full decode below
	// cost about half of the worker's CPU per event in the round-trip profile.
	if typ, ok := leadingType(data); ok && json.Valid(data) {
		return typ, nil
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return "", err
	}
	return head.Type, nil
}

// leadingType returns the value of "type" when data starts with {"type":"<plain string>".
func leadingType(data []byte) (string, bool) {
	const prefix = `{"type":"`
	if !bytes.HasPrefix(data, []byte(prefix)) {
		return "", false
	}
	rest := data[len(prefix):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", false
	}
	// A frame with a second top-level "type" key would get the later one from encoding/json and
	// the first one here; no origin sends such a frame, and either value leads to the same handling
	// of a malformed event.
	return internType(rest[:end]), true
}

// internType returns the event types the origin sends as constants, so the hot path does not
// allocate a string per event.
func internType(b []byte) string {
	for _, t := range knownTypes {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}

var knownTypes = [...]string{
	"response.output_text.delta", "response.created", "response.in_progress",
	"response.output_item.added", "response.content_part.added", "response.output_text.done",
	"response.content_part.done", "response.output_item.done", "response.completed",
	"response.failed", "response.incomplete", "error", "codex.rate_limits",
}

// isRateLimitsFrame reports whether data is a codex.rate_limits event; cheap for the common case.
func isRateLimitsFrame(data []byte) bool {
	if !bytes.Contains(data, []byte(typeRateLimits)) {
		return false
	}
	t, err := eventType(data)
	return err == nil && t == typeRateLimits
}

// errorEvent is the liberal shape of an "error" event and of the error inside response.failed.
type errorEvent struct {
	Status  json.RawMessage `json:"status"`
	Error   json.RawMessage `json:"error"`
	Headers map[string]any  `json:"headers"`
	// Some servers put code and message at the top level.
	Code    json.RawMessage `json:"code"`
	Message json.RawMessage `json:"message"`
}

// num returns a JSON number (or numeric string) as float64, ok=false otherwise.
func num(raw json.RawMessage) (float64, bool) {
	s := origintext.Str(raw)
	if s == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// connLimitEvent reports whether an error event says the socket reached its connection limit.
func connLimitEvent(data []byte) bool {
	if !bytes.Contains(data, []byte(codeConnLimit)) {
		return false
	}
	var ev errorEvent
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	d := origintext.Detail(ev.Error)
	return origintext.Str(d.Code) == codeConnLimit || origintext.Str(d.Type) == codeConnLimit || origintext.Str(ev.Code) == codeConnLimit
}

// mapErrorEvent maps an "error" event to the contract error.
func mapErrorEvent(data []byte, r origintext.Redactor, now time.Time) *schemas.Error {
	var ev errorEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return upstreamError("bad error event from origin")
	}
	d := origintext.Detail(ev.Error)
	typ, code := origintext.Str(d.Type), origintext.Str(d.Code)
	if code == "" {
		code = origintext.Str(ev.Code)
	}
	msg := origintext.Str(d.Message)
	if msg == "" {
		msg = origintext.Str(ev.Message)
	}
	upstreamCode := code
	if upstreamCode == "" {
		upstreamCode = typ
	}
	// Checked as a float first: converting NaN or a huge number to int is implementation-defined.
	status := 502
	if f, ok := num(ev.Status); ok && f >= 400 && f < 600 {
		status = int(f)
	}
	e := &schemas.Error{Status: status, Code: schemas.CodeUpstreamError, UpstreamCode: r.Clean(upstreamCode)}
	switch {
	case status == 401:
		e.Code = schemas.CodeUpstreamUnauthorized
	case status == 429 || isRateLimitCode(typ) || isRateLimitCode(code):
		e.Status, e.Code = 429, schemas.CodeUpstreamRateLimited
		e.RetryAfter = eventRetryAfter(d, ev.Headers, now)
	}
	text := r.Clean(msg)
	if text == "" {
		text = "no message"
	}
	e.Message = "codex: origin error: " + text
	return e
}

func isRateLimitCode(s string) bool {
	return s == "rate_limit_exceeded" || s == "usage_limit_reached"
}

// maxRetryAfter caps every retry time taken from the origin. Usage limits can reset days ahead;
// anything beyond this is nonsense (or an overflow in the making) and is clamped.
const maxRetryAfter = 30 * 24 * time.Hour

// duration converts f units (seconds, milliseconds, possibly fractional) to a duration in
// [0, maxRetryAfter]: NaN and non-positive values give 0, huge values and +Inf the cap. A plain
// time.Duration(f*unit) overflows into negative durations for large f.
func duration(f float64, unit time.Duration) time.Duration {
	if math.IsNaN(f) || f <= 0 {
		return 0
	}
	if f >= float64(maxRetryAfter/unit) {
		return maxRetryAfter
	}
	return time.Duration(f * float64(unit))
}

// eventRetryAfter returns when a rate-limited request may be retried: from resets_at (unix
// seconds), else resets_in_seconds, else a retry-after(-ms) header carried in the event; 0 when
// unknown.
func eventRetryAfter(d origintext.ErrorDetail, headers map[string]any, now time.Time) time.Duration {
	if f, ok := num(d.ResetsAt); ok && f > 0 {
		if wait := duration(f-float64(now.UnixNano())/1e9, time.Second); wait > 0 {
			return wait
		}
	}
	if f, ok := num(d.ResetsIn); ok {
		if wait := duration(f, time.Second); wait > 0 {
			return wait
		}
	}
	for k, v := range headers {
		s := strings.TrimSpace(fmt.Sprint(v))
		switch strings.ToLower(k) {
		case "retry-after-ms":
			if f, err := strconv.ParseFloat(s, 64); err == nil && duration(f, time.Millisecond) > 0 {
				return duration(f, time.Millisecond)
			}
		case "retry-after":
			if d := parseRetryAfter(s, now); d > 0 {
				return d
			}
		}
	}
	return 0
}

// parseRetryAfter parses a Retry-After value: seconds (possibly fractional) or an HTTP date.
func parseRetryAfter(s string, now time.Time) time.Duration {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return duration(f, time.Second)
	}
	if t, err := http1Date(s); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	return 0
}

// mapFailed maps response.failed: 502 with the origin's code and message.
func mapFailed(data []byte, r origintext.Redactor) *schemas.Error {
	var ev struct {
		Response struct {
			Error json.RawMessage `json:"error"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return upstreamError("bad response.failed event from origin")
	}
	d := origintext.Detail(ev.Response.Error)
	code := origintext.Str(d.Code)
	if code == "" {
		code = origintext.Str(d.Type)
	}
	msg := r.Clean(origintext.Str(d.Message))
	if msg == "" {
		msg = "no message"
	}
	e := upstreamError("response failed: %s", msg)
	e.UpstreamCode = r.Clean(code)
	return e
}

// mapIncomplete maps response.incomplete: 502 with the reason.
func mapIncomplete(data []byte, r origintext.Redactor) *schemas.Error {
	var ev struct {
		Response struct {
			Details struct {
				Reason json.RawMessage `json:"reason"`
			} `json:"incomplete_details"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return upstreamError("bad response.incomplete event from origin")
	}
	reason := r.Clean(origintext.Str(ev.Response.Details.Reason))
	if reason == "" {
		reason = "unknown"
	}
	e := upstreamError("response incomplete: %s", reason)
	e.UpstreamCode = reason
	return e
}
