package codextest

import (
	"encoding/json"
	"slices"
)

// originFields are the top-level fields of a response.create frame (or HTTP body) that the Codex
// origin reads (codex-protocol.md). With [Options.Strict] any other field is refused, as the origin
// refuses metadata, temperature, top_p, max_output_tokens and the like.
var originFields = map[string]bool{
	"type": true, "model": true, "instructions": true, "input": true, "tools": true,
	"tool_choice": true, "parallel_tool_calls": true, "reasoning": true, "store": true,
	"stream": true, "include": true, "text": true, "prompt_cache_key": true,
	"service_tier": true, "previous_response_id": true, "client_metadata": true, "generate": true,
}

// unsupportedField returns the first field (in name order) of the JSON object body that the origin
// does not accept, or "" when there is none or body is not an object.
func unsupportedField(body []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	var bad []string
	for k := range m {
		if !originFields[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	slices.Sort(bad)
	return bad[0]
}

// strictRefusal is the error the origin answers a body with a field it does not accept, or nil
// when the server is not strict or the body has none.
func (s *Server) strictRefusal(body []byte) *errorEvent {
	if !s.opts.Strict {
		return nil
	}
	f := unsupportedField(body)
	if f == "" {
		return nil
	}
	s.c.unsupported.Add(1)
	s.logf("codextest: refused unsupported parameter %q (strict)", f)
	ev := invalidRequestEvent("unsupported_parameter", "Unsupported parameter: "+f)
	ev.Error.Param = f
	return ev
}
