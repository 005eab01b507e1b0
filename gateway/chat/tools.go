package chat

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/codexpool/codexpool/gateway/wire"
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

// tools maps function tools; other tool types are refused.
func tools(n wire.Names, ts []tool) ([]any, error) {
	out := make([]any, 0, len(ts))
	for i, t := range ts {
		if t.Type != "function" {
			return nil, refuse(fmt.Sprintf("tools[%d].type", i), "only function tools are supported, not %q", t.Type)
		}
		if t.Function.Name == "" {
			return nil, refuse(fmt.Sprintf("tools[%d].function.name", i), "a function tool needs a name")
		}
		f := t.Function
		out = append(out, wire.Tool(n, f.Name, f.Description, f.Parameters, f.Strict != nil && *f.Strict))
	}
	return out, nil
}

// toolChoice maps tool_choice: the strings as they are, a named function to the Responses shape.
func toolChoice(n wire.Names, tc json.RawMessage) (json.RawMessage, error) {
	tc = bytes.TrimSpace(tc)
	if len(tc) == 0 || bytes.Equal(tc, []byte("null")) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(tc, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return wire.MustMarshal(s), nil
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
		return wire.MustMarshal(namedChoice{"function", n.Upstream(f.Function.Name)}), nil
	case f.Type == "allowed_tools" && f.Allowed != nil:
		return allowedTools(n, f.Allowed)
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
func allowedTools(n wire.Names, a *allowed) (json.RawMessage, error) {
	out := struct {
		Type  string        `json:"type"`
		Mode  string        `json:"mode"`
		Tools []namedChoice `json:"tools"`
	}{Type: "allowed_tools", Mode: a.Mode}
	for i, t := range a.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, refuse(fmt.Sprintf("tool_choice.allowed_tools.tools[%d]", i), "must be a named function")
		}
		out.Tools = append(out.Tools, namedChoice{"function", n.Upstream(t.Function.Name)})
	}
	if (a.Mode != "auto" && a.Mode != "required") || len(out.Tools) == 0 {
		return nil, refuse("tool_choice.allowed_tools", "needs mode auto or required and at least one tool")
	}
	return wire.MustMarshal(out), nil
}
