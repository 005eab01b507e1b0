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
		Type     string   `json:"type"`
		Function named    `json:"function"`
		Allowed  *allowed `json:"allowed_tools"`
	}
	switch {
	case json.Unmarshal(tc, &f) != nil:
	case f.Type == "function" && f.Function.Name != "":
		return mustMarshal(namedChoice{"function", n.upstream(f.Function.Name)}), nil
	case f.Type == "allowed_tools" && f.Allowed != nil:
		return n.allowedTools(f.Allowed)
	}
	return nil, refuse("tool_choice", `must be auto, none, required, {"type":"function","function":{"name":...}} or allowed_tools`)
}

type named struct {
	Name string `json:"name"`
}

// namedChoice is a Responses function tool choice, and an allowed tool.
type namedChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// allowed is tool_choice.allowed_tools.
type allowed struct {
	Mode  string `json:"mode"`
	Tools []struct {
		Type     string `json:"type"`
		Function named  `json:"function"`
	} `json:"tools"`
}

// allowedTools maps {mode, tools:[{type:function,function:{name}}]} to the Responses shape.
func (n names) allowedTools(a *allowed) (json.RawMessage, error) {
	out := struct {
		Type  string        `json:"type"`
		Mode  string        `json:"mode"`
		Tools []namedChoice `json:"tools"`
	}{Type: "allowed_tools", Mode: a.Mode}
	for i, t := range a.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, refuse(fmt.Sprintf("tool_choice.allowed_tools.tools[%d]", i), "must be a named function")
		}
		out.Tools = append(out.Tools, namedChoice{"function", n.upstream(t.Function.Name)})
	}
	if (a.Mode != "auto" && a.Mode != "required") || len(out.Tools) == 0 {
		return nil, refuse("tool_choice.allowed_tools", "needs mode auto or required and at least one tool")
	}
	return mustMarshal(out), nil
}
