package anthropic

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/codexpool/codexpool/gateway/wire"
)

// compactMarker is in Claude Code's compaction request: its effort is capped at low, as a
// summary needs no deep reasoning.
const compactMarker = "CRITICAL: Respond with TEXT ONLY"

// textFormat is the Responses text option of output_config.format: a json_schema format made
// strict (every property required, no others), or json_object; nil for none.
func textFormat(f *outputFormat) *wire.TextOptions {
	if f == nil {
		return nil
	}
	switch f.Type {
	case "json_object":
		return &wire.TextOptions{Format: json.RawMessage(`{"type":"json_object"}`)}
	case "json_schema":
		var schema map[string]any
		if json.Unmarshal(f.Schema, &schema) != nil || schema == nil {
			return nil
		}
		name := f.Name
		if name == "" {
			name = "output"
		}
		return &wire.TextOptions{Format: wire.MustMarshal(obj{"type": "json_schema", "name": name, "schema": strictSchema(schema), "strict": true})}
	}
	return nil
}

// strictSchema lists every property of each object as required and closes the object, as the
// backend's strict mode demands; nested objects and array items too.
func strictSchema(s map[string]any) map[string]any {
	if props, ok := s["properties"].(map[string]any); ok {
		req := make([]string, 0, len(props))
		for k, v := range props {
			req = append(req, k)
			if sub, ok := v.(map[string]any); ok {
				props[k] = strictSchema(sub)
			}
		}
		slices.Sort(req)
		s["required"] = req
		s["additionalProperties"] = false
	}
	if items, ok := s["items"].(map[string]any); ok {
		s["items"] = strictSchema(items)
	}
	return s
}

// capForCompaction lowers the effort of a Claude Code compaction request to low.
func capForCompaction(r *wire.Reasoning, body []byte) *wire.Reasoning {
	if r == nil || !bytes.Contains(body, []byte(compactMarker)) {
		return r
	}
	switch r.Effort {
	case "medium", "high", "xhigh":
		return &wire.Reasoning{Effort: "low", Summary: r.Summary}
	}
	return r
}
