package codex

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/codexpool/codexpool/internal/origintext"
	"github.com/codexpool/codexpool/schemas"
)

// fuzzToken and fuzzAccount are the secrets FuzzEventParse plants in the origin's frames: no error
// built from a frame may carry them.
const (
	fuzzToken   = "sk-fuzz-SECRET-token-0987654321"
	fuzzAccount = "acct-fuzz-4242"
)

// fuzzMaxRetryAfter bounds any retry time the parser may hand out.
const fuzzMaxRetryAfter = maxRetryAfter

// contractCodes are the codes an error mapped from the origin may carry.
var contractCodes = map[schemas.Code]bool{
	schemas.CodeUpstreamUnauthorized: true, schemas.CodeOriginForbidden: true,
	schemas.CodeUpstreamRateLimited: true, schemas.CodeUpstreamError: true, schemas.CodeUpstreamTimeout: true,
}

// FuzzEventParse feeds arbitrary upstream frames to everything that classifies and maps them: the
// event type, the rate-limit and connection-limit detectors, the error/failed/incomplete mappers,
// response.completed extraction, the handshake body reader and Retry-After parsing. Invariants:
// no panic; every mapped error is a contract error with a 4xx/5xx status, a valid code, a
// non-negative bounded retry time, a valid UTF-8 message of bounded size that never carries a
// configured secret; the detectors agree with the full parse.
func FuzzEventParse(f *testing.F) {
	seeds := []string{
		`{"type":"response.created","response":{"id":"r"}}`,
		`{"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}`,
		`{"type":"response.completed","response":null}`,
		`{"type":"response.failed","response":{"error":{"code":"server_error","message":"boom ` + fuzzToken + `"}}}`,
		`{"type":"response.failed","response":{"error":"plain string"}}`,
		`{"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"}}}`,
		`{"type":"error","status":429,"error":{"type":"usage_limit_reached","message":"m","resets_at":1738888888}}`,
		`{"type":"error","status":429,"error":{"type":"rate_limit_exceeded","resets_in_seconds":1e300}}`,
		`{"type":"error","status":"429","error":{"code":"x"},"headers":{"retry-after":"1e300"}}`,
		`{"type":"error","status":429,"error":{},"headers":{"Retry-After-Ms":"NaN"}}`,
		`{"type":"error","status":429,"error":{"resets_at":"-Inf"}}`,
		`{"type":"error","error":{"message":"no status ` + fuzzAccount + `"}}`,
		`{"type":"error","status":400,"error":{"code":"websocket_connection_limit_reached","message":"limit"}}`,
		`{"type":"error","code":"websocket_connection_limit_reached","message":"top level"}`,
		`{"type":"error","status":1e999}`,
		`{"type":"codex.rate_limits","primary":{"used_percent":1}}`,
		`{"type":5}`,
		`{"type":null}`,
		`null`,
		`[]`,
		`"codex.rate_limits"`,
		`{"type":"response.output_text.delta","delta":`,
		"\xff\xfe",
		`{"type":"error","error":{"message":"` + strings.Repeat("é", 700) + fuzzToken[:9] + `"}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), "2", int16(429))
	}
	f.Add([]byte(`{"error":{"message":"bad token `+fuzzToken+`"}}`), "Wed, 21 Oct 2015 07:28:00 GMT", int16(403))
	f.Add([]byte(`{"detail":"nope"}`), "NaN", int16(401))
	f.Add([]byte(`oops`), "-Inf", int16(503))

	r := origintext.NewRedactor(fuzzToken, fuzzAccount)
	now := time.Unix(1_700_000_000, 0)
	c := &Client{}

	f.Fuzz(func(t *testing.T, data []byte, retryAfter string, status int16) {
		typ, err := eventType(data)
		if err == nil {
			if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
				t.Fatalf("eventType(%q) = %q, nil; want an error for a frame that is not a JSON object", data, typ)
			}
		}
		if err == nil {
			var head struct {
				Type string `json:"type"`
			}
			if uerr := json.Unmarshal(data, &head); uerr != nil {
				t.Fatalf("eventType(%q) = %q, nil; json.Unmarshal says %v", data, typ, uerr)
			} else if head.Type != typ && bytes.Count(data, []byte(`"type"`)) < 2 {
				t.Fatalf("eventType(%q) = %q, json.Unmarshal gives %q", data, typ, head.Type)
			}
		}
		if isRateLimitsFrame(data) && (err != nil || typ != typeRateLimits) {
			t.Fatalf("isRateLimitsFrame(%q) but eventType = %q, %v", data, typ, err)
		}
		if connLimitEvent(data) && !bytes.Contains(data, []byte(codeConnLimit)) {
			t.Fatalf("connLimitEvent(%q) without the code in the frame", data)
		}

		clean := r.CleanFrame(data)
		if bytes.Contains(clean, []byte(fuzzToken)) || bytes.Contains(clean, []byte(fuzzAccount)) {
			t.Fatalf("cleanFrame(%q) = %q still carries a secret", data, clean)
		}
		if json.Valid(data) && !json.Valid(clean) {
			t.Fatalf("cleanFrame(%q) = %q is no longer JSON", data, clean)
		}
		if !bytes.Contains(data, []byte(fuzzToken)) && !bytes.Contains(data, []byte(fuzzAccount)) && !bytes.Equal(clean, data) {
			t.Fatalf("cleanFrame changed a frame without secrets: %q -> %q", data, clean)
		}
		checkError(t, "mapErrorEvent", mapErrorEvent(data, r, now))
		checkError(t, "mapFailed", mapFailed(data, r))
		checkError(t, "mapIncomplete", mapIncomplete(data, r))
		if resp, ok := schemas.CompletedResponse(data); ok && !json.Valid(resp) {
			t.Fatalf("CompletedResponse(%q) = %q, not JSON", data, resp)
		}

		if d := parseRetryAfter(retryAfter, now); d < 0 || d > fuzzMaxRetryAfter {
			t.Fatalf("parseRetryAfter(%q) = %v, want within [0, %v]", retryAfter, d, fuzzMaxRetryAfter)
		}
		st := int(status)
		if st < 100 || st > 599 || st == http.StatusSwitchingProtocols {
			st = 500
		}
		resp := &http.Response{StatusCode: st, Header: http.Header{"Retry-After": {retryAfter}},
			Body: http.NoBody}
		if len(data) > 0 {
			resp.Body = nopCloser{bytes.NewReader(data)}
		}
		herr := c.classifyStatus(resp, r, true)
		var se *schemas.Error
		if fe, ok := herr.(*forbiddenError); ok {
			se = fe.err
		} else {
			se, _ = herr.(*schemas.Error)
		}
		checkError(t, "classifyStatus", se)
	})
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// checkError asserts the invariants of a contract error mapped from origin data.
func checkError(t *testing.T, what string, e *schemas.Error) {
	t.Helper()
	if e == nil {
		t.Fatalf("%s returned no error", what)
	}
	if e.Status < 400 || e.Status > 599 {
		t.Fatalf("%s: status %d, want 4xx/5xx", what, e.Status)
	}
	if !contractCodes[e.Code] {
		t.Fatalf("%s: code %q is not a contract code", what, e.Code)
	}
	if e.RetryAfter < 0 || e.RetryAfter > fuzzMaxRetryAfter {
		t.Fatalf("%s: retry after %v, want within [0, %v]", what, e.RetryAfter, fuzzMaxRetryAfter)
	}
	for _, s := range []string{e.Message, e.UpstreamCode, string(e.Body())} {
		if strings.Contains(s, fuzzToken) || strings.Contains(s, fuzzAccount) {
			t.Fatalf("%s: a secret leaked: %q", what, s)
		}
		if !utf8.ValidString(s) {
			t.Fatalf("%s: invalid UTF-8: %q", what, s)
		}
	}
	if len(e.Message) > origintext.MaxText+200 || len(e.UpstreamCode) > origintext.MaxText {
		t.Fatalf("%s: message of %d bytes, upstream code of %d", what, len(e.Message), len(e.UpstreamCode))
	}
	var body struct {
		Error struct {
			RetryAfterMS *int64 `json:"retry_after_ms"`
		} `json:"error"`
	}
	if err := json.Unmarshal(e.Body(), &body); err != nil {
		t.Fatalf("%s: body %q is not JSON: %v", what, e.Body(), err)
	}
	if ms := body.Error.RetryAfterMS; ms != nil && *ms < 0 {
		t.Fatalf("%s: retry_after_ms %d", what, *ms)
	}
}
