package schemas

import (
	"encoding/json"
	"errors"
	"sort"
)

// Request is a generation request (request.schema.json). validate.Request makes a validated one
// from a payload; the queue sets ID and the worker calls Upstream.
// A Request is not modified by its methods, so it may be shared once ID is set.
type Request struct {
	// ID is the request's correlation id (Codex-Request-Id header, or generated). Set by queue.
	ID string
	// Model is the requested model, "" when the request names none.
	Model string
	// Session is the Codex-Session-Id the request came with, "" for none. Set by queue.
	Session string
	// Stream is true when the client asked for a streamed reply.
	Stream bool
	// Metered is true when a gateway records the request's usage (header Codex-Metered); the
	// worker then records none of its own. Set by queue.
	Metered bool
	// StickyKey is the sticky-routing key from the request's session headers (see SessionKey);
	// "" = none (the worker then uses PromptCacheKey). Set by queue.
	StickyKey string
	// fields holds every top-level field of the request as received (raw JSON values).
	fields map[string]json.RawMessage
}

// NewRequest returns a Request over fields, the top-level fields of a request payload as raw JSON
// values. It trusts its caller: validate.Request checks a payload and then calls it. Model and
// Stream are read from fields ("" and false when absent or of another type).
func NewRequest(fields map[string]json.RawMessage) *Request {
	r := &Request{fields: fields}
	_ = json.Unmarshal(fields["model"], &r.Model)
	_ = json.Unmarshal(fields["stream"], &r.Stream)
	return r
}

// NotUpstream are the request fields the Codex origin refuses (400 "Unsupported parameter") or
// ignores: Upstream leaves them out, so they never fail a request opaquely at the origin.
var NotUpstream = map[string]bool{
	"temperature": true, "top_p": true, "max_output_tokens": true, "max_tokens": true,
	"stream_options": true, "safety_identifier": true, "prompt_cache_retention": true,
}

// Upstream returns the response.create frame the worker sends to the origin: every field of
// the request unchanged (its raw JSON bytes) but those in NotUpstream, plus
// "type":"response.create", "store":false, "stream":true, "model" (defaultModel when the request
// names none), and a string "input" turned into one user message item. "metadata", which the
// origin refuses, goes as "client_metadata", which it accepts (dropped when the request has a
// client_metadata of its own). Keys come in a fixed order: type, model, the request's other
// fields sorted, store, stream.
func (r *Request) Upstream(defaultModel string) ([]byte, error) {
	if r == nil || r.fields == nil {
		return nil, errors.New("schemas: Upstream on a Request NewRequest did not make")
	}
	model := r.Model
	if model == "" {
		model = defaultModel
	}
	if model == "" {
		return nil, errors.New("schemas: Upstream: the request names no model and there is no default")
	}
	keys, size := r.upstreamKeys()
	size += 128 + len(model)

	b := make([]byte, 0, size)
	b = append(b, `{"type":"response.create","model":`...)
	b = appendString(b, model)
	for _, k := range keys {
		b = append(b, ',')
		v := r.fields[k]
		if k == "metadata" {
			k = "client_metadata"
		}
		b = appendString(b, k)
		b = append(b, ':')
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

// upstreamKeys returns the request's fields that go upstream as they are, in the order they go
// (sorted by the name they go under: metadata as client_metadata), and their size.
func (r *Request) upstreamKeys() ([]string, int) {
	keys := make([]string, 0, len(r.fields))
	size := 0
	_, ownClientMetadata := r.fields["client_metadata"]
	for k, v := range r.fields {
		switch {
		case k == "type", k == "model", k == "store", k == "stream", NotUpstream[k]:
			continue
		case k == "metadata" && ownClientMetadata:
			continue
		}
		keys = append(keys, k)
		size += len(k) + len(v) + 20
	}
	sort.Slice(keys, func(i, j int) bool { return upstreamName(keys[i]) < upstreamName(keys[j]) })
	return keys, size
}

func upstreamName(k string) string {
	if k == "metadata" {
		return "client_metadata"
	}
	return k
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

// PromptCacheKey returns the request's prompt_cache_key, "" when it has none or it is not a
// string. Workers with several accounts send requests sharing a key to the same account, where
// the origin's prompt cache for it lives.
func (r *Request) PromptCacheKey() string {
	if r == nil {
		return ""
	}
	var k string
	_ = json.Unmarshal(r.fields["prompt_cache_key"], &k)
	return k
}
