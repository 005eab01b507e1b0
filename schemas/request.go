package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"unicode/utf8"
)

// MaxNesting is how deeply a request's arrays and objects may nest. Real requests stay far
// below it (a tool's parameter schema is the deepest part); refusing early keeps hostile
// payloads from costing the decoder time and stack.
const MaxNesting = 128

// Request is a validated generation request (request.schema.json).
// ParseRequest makes one; the queue sets ID and the worker calls Upstream.
// A Request is not modified by its methods, so it may be shared once ID is set.
type Request struct {
	// ID is the request's correlation id (Codex-Request-Id header, or generated). Set by queue.
	ID string
	// Model is the requested model, "" when the request names none.
	Model string
	// Stream is true when the client asked for a streamed reply.
	Stream bool
	// fields holds every top-level field of the request as received (raw JSON values).
	fields map[string]json.RawMessage
}

// Why the fields a stateless pool cannot honour are refused, in the order they are checked.
var forbidden = []struct{ field, why string }{
	{"previous_response_id", `not supported: responses are not stored and the next request may reach another worker, so a stateless pool cannot continue one; send the whole conversation in "input"`},
	{"background", `not supported: a background response must be stored and polled later, which a stateless pool cannot do; use "stream": true for long generations`},
}

// ParseRequest decodes and validates a request payload against request.schema.json and the
// contract's rules. A refusal is an *Error with CodeInvalidRequest whose message names the
// offending field (e.g. `"input": must be a non-empty string or a non-empty array of input
// items`). Beyond the schema it refuses invalid UTF-8 (encoding/json would silently replace
// it) and nesting deeper than MaxNesting. When a top-level key appears twice the last one
// wins, for validation and forwarding alike. Unknown fields are kept and forwarded.
//
// Other errors (not *Error) mean the embedded schema is broken, a bug of this package.
func ParseRequest(payload []byte) (*Request, error) {
	if len(bytes.TrimSpace(payload)) == 0 {
		return nil, Errorf(CodeInvalidRequest, "request is empty: want a JSON object")
	}
	if !utf8.Valid(payload) {
		return nil, Errorf(CodeInvalidRequest, "request is not valid UTF-8 (at byte %d)", invalidUTF8At(payload))
	}
	if field, deep := tooDeep(payload, MaxNesting); deep {
		if field == "" {
			return nil, Errorf(CodeInvalidRequest, "request nests deeper than %d levels", MaxNesting)
		}
		return nil, Errorf(CodeInvalidRequest, "%s: nests deeper than %d levels", strconv.Quote(field), MaxNesting)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, Errorf(CodeInvalidRequest, "request is not valid JSON: %s (at byte %d)", syn.Error(), syn.Offset)
		}
		return nil, Errorf(CodeInvalidRequest, "request must be a JSON object")
	}
	if fields == nil { // the payload was null
		return nil, Errorf(CodeInvalidRequest, "request must be a JSON object")
	}
	for _, f := range forbidden {
		if _, ok := fields[f.field]; ok {
			return nil, Errorf(CodeInvalidRequest, "%s: %s", strconv.Quote(f.field), f.why)
		}
	}

	sch, err := schemaFor(RequestSchema)
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
		v, err := decodeValue(raw)
		if err != nil { // cannot happen after json.Unmarshal accepted the payload
			return nil, Errorf(CodeInvalidRequest, "%s: %v", strconv.Quote(name), err)
		}
		doc[name] = v
	}
	if err := sch.Validate(doc); err != nil {
		return nil, Errorf(CodeInvalidRequest, "%s", describe(err))
	}

	r := &Request{fields: fields}
	r.Model, _ = doc["model"].(string)
	r.Stream, _ = doc["stream"].(bool)
	return r, nil
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

// tooDeep reports whether arrays and objects in b nest deeper than limit, and if so the
// top-level key whose value does (when b is an object). It only counts brackets outside
// strings, so it works on any bytes; malformed JSON is left for the decoder to report.
func tooDeep(b []byte, limit int) (field string, deep bool) {
	depth := 0
	var lastString, key []byte
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			j := i + 1
			for {
				k := bytes.IndexAny(b[j:], `"\`)
				if k < 0 {
					return "", false // unterminated string: not JSON
				}
				j += k
				if b[j] == '"' {
					break
				}
				j += 2 // skip the escaped character
				if j >= len(b) {
					return "", false
				}
			}
			if depth == 1 {
				lastString = b[i : j+1]
			}
			i = j
		case ':':
			if depth == 1 {
				key = lastString
			}
		case '{', '[':
			depth++
			if depth > limit {
				if key == nil {
					return "", true
				}
				var s string
				if err := json.Unmarshal(key, &s); err != nil {
					s = string(key)
				}
				return s, true
			}
		case '}', ']':
			depth--
		}
	}
	return "", false
}

// Upstream returns the response.create frame the worker sends to the origin: every field of
// the request unchanged (its raw JSON bytes), plus "type":"response.create", "store":false,
// "stream":true, "model" (defaultModel when the request names none), and a string "input"
// turned into one user message item. Keys come in a fixed order: type, model, the request's
// other fields sorted, store, stream.
func (r *Request) Upstream(defaultModel string) ([]byte, error) {
	if r == nil || r.fields == nil {
		return nil, errors.New("schemas: Upstream on a request ParseRequest did not make")
	}
	model := r.Model
	if model == "" {
		model = defaultModel
	}
	if model == "" {
		return nil, errors.New("schemas: Upstream: the request names no model and there is no default")
	}
	keys := make([]string, 0, len(r.fields))
	size := 128 + len(model)
	for k, v := range r.fields {
		switch k {
		case "type", "model", "store", "stream":
			continue
		}
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	sort.Strings(keys)

	b := make([]byte, 0, size)
	b = append(b, `{"type":"response.create","model":`...)
	b = appendString(b, model)
	for _, k := range keys {
		b = append(b, ',')
		b = appendString(b, k)
		b = append(b, ':')
		v := r.fields[k]
		if k == "input" && len(v) > 0 && v[0] == '"' {
			// The raw JSON string goes in as it is: no decode, no re-encode.
			b = append(b, `[{"type":"message","role":"user","content":[{"type":"input_text","text":`...)
			b = append(b, v...)
			b = append(b, `}]}]`...)
			continue
		}
		b = append(b, v...)
	}
	b = append(b, `,"store":false,"stream":true}`...)
	return b, nil
}

// appendString appends s as a JSON string. Plain ASCII, the usual case, is copied as is.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
