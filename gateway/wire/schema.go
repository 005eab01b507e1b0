package wire

import (
	"bytes"
	"encoding/json"
)

// EmptySchema stands for a tool without parameters: the Responses API requires an object schema.
var EmptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// refusedSchemaKeys are top-level members of a tool's schema the origin refuses or that mean
// nothing to it: JSON Schema's $schema (zod-to-json-schema and the MCP SDKs send it), Anthropic's
// cache_control and defer_loading.
var refusedSchemaKeys = []string{"$schema", "cache_control", "defer_loading"}

// ToolParameters makes a tool's JSON Schema one the origin takes: null, absent, invalid or empty
// becomes EmptySchema; $schema, cache_control and defer_loading are removed; a missing "type"
// becomes "object", and an object without "properties" gets {}. A schema that needs none of this
// is returned byte for byte; otherwise its top level is re-encoded with sorted keys and nested
// values kept as sent.
func ToolParameters(p json.RawMessage) json.RawMessage {
	p = bytes.TrimSpace(p)
	if len(p) == 0 || p[0] != '{' {
		return EmptySchema
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil || len(m) == 0 {
		return EmptySchema
	}
	changed := false
	for _, k := range refusedSchemaKeys {
		if _, ok := m[k]; ok {
			delete(m, k)
			changed = true
		}
	}
	if _, ok := m["type"]; !ok {
		m["type"] = json.RawMessage(`"object"`)
		changed = true
	}
	if _, ok := m["properties"]; !ok && bytes.Equal(m["type"], []byte(`"object"`)) {
		m["properties"] = json.RawMessage(`{}`)
		changed = true
	}
	if !changed {
		return p
	}
	return MustMarshal(m)
}
