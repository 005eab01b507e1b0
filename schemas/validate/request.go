package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/jsonobj"
)

// MaxNesting is how deeply a request's arrays and objects may nest. Real requests stay far
// below it (a tool's parameter schema is the deepest part); refusing early keeps hostile
// payloads from costing the decoder time and stack.
const MaxNesting = 128

// Why the fields a stateless pool cannot honour are refused, in the order they are checked.
var forbidden = []struct{ field, why string }{
	{"previous_response_id", `only in a session (the Codex-Session-Id header over NATS, the WebSocket of GET /v1/responses on the gateway); otherwise send the whole conversation in "input"`},
	{"background", `not supported: a background response must be stored and polled later, which a stateless pool cannot do; use "stream": true for long generations`},
}

// Request decodes and validates a request payload against request.schema.json and the
// contract's rules. A refusal is a *schemas.Error with schemas.CodeInvalidRequest whose message names the
// offending field (e.g. `"input": must be a non-empty string or a non-empty array of input
// items`). Beyond the schema it refuses invalid UTF-8 (encoding/json would silently replace
// it) and nesting deeper than MaxNesting. When a top-level key appears twice the last one
// wins, for validation and forwarding alike. Unknown fields are kept and forwarded.
//
// Other errors (not *schemas.Error) mean the embedded schema is broken, a bug of this package.
func Request(payload []byte) (*schemas.Request, error) { return request(payload, false) }

// SessionRequest is Request for a request of a session (it came with Codex-Session-Id): it also
// accepts previous_response_id, a non-empty string.
func SessionRequest(payload []byte) (*schemas.Request, error) { return request(payload, true) }

func request(payload []byte, session bool) (*schemas.Request, error) {
	if len(jsonobj.TrimSpace(payload)) == 0 {
		return nil, schemas.Errorf(schemas.CodeInvalidRequest, "request is empty: want a JSON object")
	}
	if !utf8.Valid(payload) {
		return nil, schemas.Errorf(schemas.CodeInvalidRequest, "request is not valid UTF-8 (at byte %d)", invalidUTF8At(payload))
	}
	spans, field, deep := jsonobj.Scan(payload, MaxNesting)
	if deep {
		if field == "" {
			return nil, schemas.Errorf(schemas.CodeInvalidRequest, "request nests deeper than %d levels", MaxNesting)
		}
		return nil, schemas.Errorf(schemas.CodeInvalidRequest, "%s: nests deeper than %d levels", strconv.Quote(field), MaxNesting)
	}
	if !json.Valid(payload) {
		msg := "request is not valid JSON"
		var syn *json.SyntaxError
		if err := json.Unmarshal(payload, new(json.RawMessage)); errors.As(err, &syn) {
			msg += fmt.Sprintf(": %s (at byte %d)", syn.Error(), syn.Offset)
		}
		return nil, schemas.Errorf(schemas.CodeInvalidRequest, "%s", msg)
	}
	if jsonobj.TrimSpace(payload)[0] != '{' { // not empty: checked first
		return nil, schemas.Errorf(schemas.CodeInvalidRequest, "request must be a JSON object")
	}
	// The payload is valid JSON from here on, so the spans Scan found are its top-level fields.
	payload = bytes.Clone(payload) // the caller may reuse its buffer; fields point into ours
	fields := make(map[string]json.RawMessage, len(spans))
	for _, sp := range spans {
		fields[jsonobj.Unquote(payload[sp.Key[0]:sp.Key[1]])] = payload[sp.Val[0]:sp.Val[1]:sp.Val[1]]
	}
	for _, f := range forbidden {
		if session && f.field == "previous_response_id" {
			continue
		}
		if _, ok := fields[f.field]; ok {
			return nil, schemas.Errorf(schemas.CodeInvalidRequest, "%s: %s", strconv.Quote(f.field), f.why)
		}
	}

	sch, err := schemaFor(schemas.RequestSchema)
	if err != nil {
		return nil, err
	}
	// Decode only what the schema describes; other fields are forwarded without a look.
	doc := make(map[string]any, len(sch.Properties))
	for name := range sch.Properties {
		raw, ok := fields[name]
		if !ok {
			continue
		}
		v, err := decodeField(raw)
		if err != nil { // cannot happen: the payload is valid JSON
			return nil, schemas.Errorf(schemas.CodeInvalidRequest, "%s: %v", strconv.Quote(name), err)
		}
		doc[name] = v
	}
	if err := sch.Validate(doc); err != nil {
		return nil, schemas.Errorf(schemas.CodeInvalidRequest, "%s", describe(err))
	}

	return schemas.NewRequest(fields), nil
}

// decodeField decodes one top-level value of a valid JSON payload for the validator.
// json.Unmarshal is several times cheaper than a json.Decoder but turns numbers into float64,
// which is inexact only for numeric constraints. request.schema.json has those only on
// top-level numbers (max_output_tokens), which stay exact json.Numbers here; nested values
// that float64 cannot hold (1e400) fall back to decodeValue.
func decodeField(raw json.RawMessage) (any, error) {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil // valid JSON without escapes: the bytes are the string
	}
	if len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return json.Number(raw), nil // a valid JSON number literal, kept exact
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return decodeValue(raw)
	}
	return v, nil
}

// invalidUTF8At returns the offset of the first invalid UTF-8 sequence in b.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}
