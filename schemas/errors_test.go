package schemas

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCodeStatus(t *testing.T) {
	want := map[Code]int{
		CodeInvalidRequest: 400, CodeRequestTooLarge: 413, CodeUpstreamUnauthorized: 401,
		CodeOriginForbidden: 403, CodeUpstreamRateLimited: 429, CodeWorkerBusy: 429,
		CodeUpstreamError: 502, CodeUnavailable: 503, CodeUpstreamTimeout: 504, CodeCancelled: 499,
		CodePreviousResponseNotFound: 400,
		Code("something_new"):        502,
	}
	if len(want) != len(Codes())+1 {
		t.Fatalf("the table covers %d codes, Codes() has %d", len(want)-1, len(Codes()))
	}
	for c, s := range want {
		if got := c.Status(); got != s {
			t.Errorf("%s: got %d, want %d", c, got, s)
		}
	}
}

func TestErrorfBodyRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   *Error
		body string
	}{
		{"plain", Errorf(CodeInvalidRequest, `%q: must be a string`, "model"),
			`{"error":{"code":"invalid_request","message":"\"model\": must be a string","status":400}}`},
		{"retry and upstream code", &Error{Status: 429, Code: CodeUpstreamRateLimited, Message: "slow down",
			RetryAfter: 2500 * time.Millisecond, UpstreamCode: "usage_limit_reached"},
			`{"error":{"code":"upstream_rate_limited","message":"slow down","status":429,"retry_after_ms":2500,"upstream_code":"usage_limit_reached"}}`},
		{"sub-millisecond retry rounds up", &Error{Status: 429, Code: CodeWorkerBusy, Message: "full", RetryAfter: time.Microsecond},
			`{"error":{"code":"worker_busy","message":"full","status":429,"retry_after_ms":1}}`},
		{"account", &Error{Status: 429, Code: CodeUpstreamRateLimited, Message: "every account is cooling down",
			RetryAfter: 30 * time.Second, UpstreamCode: "usage_limit_reached", Account: "team-b"},
			`{"error":{"code":"upstream_rate_limited","message":"every account is cooling down","status":429,"retry_after_ms":30000,"upstream_code":"usage_limit_reached","account":"team-b"}}`},
		{"carried status", &Error{Status: 400, Code: CodeUpstreamError, Message: "limit", UpstreamCode: "websocket_connection_limit_reached"},
			`{"error":{"code":"upstream_error","message":"limit","status":400,"upstream_code":"websocket_connection_limit_reached"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.in.Body()
			if string(body) != tt.body {
				t.Errorf("Body: got  %s\nwant %s", body, tt.body)
			}
			back, err := ParseErrorBody(body)
			if err != nil {
				t.Fatal(err)
			}
			want := *tt.in
			if want.RetryAfter > 0 && want.RetryAfter < time.Millisecond {
				want.RetryAfter = time.Millisecond
			}
			if *back != want {
				t.Errorf("round trip: got %+v, want %+v", *back, want)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	if got, want := Errorf(CodeWorkerBusy, "full (%d)", 256).Error(), "429 worker_busy: full (256)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	e := &Error{Status: 502, Code: CodeUpstreamError, Message: "boom", UpstreamCode: "server_error"}
	if got, want := e.Error(), "502 upstream_error (server_error): boom"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParseErrorBody(t *testing.T) {
	e, err := ParseErrorBody([]byte(`{"error":{"code":"unavailable","message":"bye"}}`))
	if err != nil || e.Status != 503 || e.Code != CodeUnavailable || e.Message != "bye" {
		t.Errorf("missing status: got %+v, %v; want the code's status 503", e, err)
	}
	for _, bad := range []string{``, `nope`, `{}`, `{"error":{}}`, `{"error":{"message":"m"}}`, `[]`} {
		if e, err := ParseErrorBody([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "schemas: ") {
			t.Errorf("%q: got %+v, %v; want a schemas: error", bad, e, err)
		}
	}
}

func TestAsError(t *testing.T) {
	orig := Errorf(CodeUpstreamTimeout, "idle")
	wrapped := fmt.Errorf("worker: generate: %w", orig)
	if got, ok := AsError(wrapped); !ok || got != orig {
		t.Errorf("wrapped: got %v, %v; want the original", got, ok)
	}
	if got, ok := AsError(fmt.Errorf("plain")); ok || got != nil {
		t.Errorf("plain error: got %v, %v; want nil, false", got, ok)
	}
	if _, ok := AsError(nil); ok {
		t.Error("nil: got ok")
	}
}

func TestResultError(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Code // "" = not an error body
	}{
		{"error body", `{"error":{"code":"upstream_error","message":"m","status":502}}`, CodeUpstreamError},
		{"response with a null error", `{"id":"resp_1","status":"completed","error":null,"output_text":"hi"}`, ""},
		{"response with an error field", `{"id":"resp_1","error":{"code":"x"},"output":[]}`, ""},
		{"null error alone", `{"error":null}`, ""},
		{"not JSON", `nope`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := ResultError([]byte(tt.body))
			if ok != (tt.want != "") || (ok && e.Code != tt.want) {
				t.Errorf("ResultError(%s) = %v, %v; want code %q", tt.body, e, ok, tt.want)
			}
		})
	}
}
