package schemas

import (
	"encoding/json"
	"errors"
)

// Request is a validated generation request (request.schema.json).
// ParseRequest makes one; the queue sets ID and the worker calls Upstream.
type Request struct {
	// ID is the request's correlation id (Codex-Request-Id header, or generated). Set by queue.
	ID string
	// Model is the requested model, "" when the request names none.
	Model string
	// Stream is true when the client asked for a streamed reply.
	Stream bool
	// fields holds every top-level field of the request as received.
	fields map[string]json.RawMessage
}

// ParseRequest decodes and validates a request payload against request.schema.json and the
// contract's rules. A refusal is an *Error with CodeInvalidRequest whose message names the
// offending field (e.g. `invalid_request: "input": must be a non-empty string or array`).
// TODO(schemas helper): real implementation.
func ParseRequest(payload []byte) (*Request, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, Errorf(CodeInvalidRequest, "request is not a JSON object: %v", err)
	}
	r := &Request{fields: m}
	if raw, ok := m["model"]; ok {
		_ = json.Unmarshal(raw, &r.Model)
	}
	if raw, ok := m["stream"]; ok {
		_ = json.Unmarshal(raw, &r.Stream)
	}
	if _, ok := m["input"]; !ok {
		return nil, Errorf(CodeInvalidRequest, `"input" is required`)
	}
	return r, nil
}

// Upstream returns the response.create frame the worker sends to the origin: every field of
// the request unchanged, plus "type":"response.create", "store":false, "stream":true, "model"
// (defaultModel when the request names none), and a string "input" turned into one user
// message item.
// TODO(schemas helper): real implementation.
func (r *Request) Upstream(defaultModel string) ([]byte, error) {
	if r == nil || r.fields == nil {
		return nil, errors.New("schemas: Upstream on an empty request")
	}
	out := make(map[string]json.RawMessage, len(r.fields)+3)
	for k, v := range r.fields {
		out[k] = v
	}
	out["type"] = json.RawMessage(`"response.create"`)
	out["store"] = json.RawMessage(`false`)
	out["stream"] = json.RawMessage(`true`)
	if r.Model == "" {
		b, _ := json.Marshal(defaultModel)
		out["model"] = b
	}
	return json.Marshal(out)
}

// WithOutputText returns the response object of a response.completed event with an
// "output_text" field added when it has none: the text of every output_text content part of
// every message item of "output", concatenated with no separator (as the OpenAI SDKs do).
// TODO(schemas helper): real implementation.
func WithOutputText(response []byte) ([]byte, error) {
	return response, nil
}
