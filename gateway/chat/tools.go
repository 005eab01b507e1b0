package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// tool is one entry of tools[].
type tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

// functionTool is a Responses function tool.
type functionTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// tools maps function tools; other tool types are refused.
func (n names) tools(ts []tool) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(ts))
	for i, t := range ts {
		if t.Type != "function" {
			return nil, refuse(fmt.Sprintf("tools[%d].type", i), "only function tools are supported, not %q", t.Type)
		}
		if t.Function.Name == "" {
			return nil, refuse(fmt.Sprintf("tools[%d].function.name", i), "a function tool needs a name")
		}
		ft := functionTool{Type: "function", Name: n.upstream(t.Function.Name), Description: t.Function.Description,
			Parameters: parameters(t.Function.Parameters), Strict: t.Function.Strict != nil && *t.Function.Strict}
		out = append(out, mustMarshal(ft))
	}
	return out, nil
}

// emptySchema stands for a tool without parameters, which the Responses API requires.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// parameters returns a tool's schema, or the empty object schema for none.
func parameters(p json.RawMessage) json.RawMessage {
	p = bytes.TrimSpace(p)
	if len(p) == 0 || p[0] != '{' {
		return emptySchema
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil {
		return emptySchema
	}
	if len(m) == 0 {
		return emptySchema
	}
	if _, has := m["properties"]; !has && bytes.Equal(m["type"], []byte(`"object"`)) {
		m["properties"] = json.RawMessage(`{}`)
		return mustMarshal(m)
	}
	return p
}

// toolChoice maps tool_choice: the strings as they are, a named function to the Responses shape.
func (n names) toolChoice(tc json.RawMessage) (json.RawMessage, error) {
	tc = bytes.TrimSpace(tc)
	if len(tc) == 0 || bytes.Equal(tc, []byte("null")) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(tc, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return mustMarshal(s), nil
		}
		return nil, refuse("tool_choice", "must be auto, none, required or a function, not %q", s)
	}
	var f struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(tc, &f) != nil || f.Type != "function" || f.Function.Name == "" {
		return nil, refuse("tool_choice", `must be auto, none, required or {"type":"function","function":{"name":...}}`)
	}
	return mustMarshal(struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}{"function", n.upstream(f.Function.Name)}), nil
}
