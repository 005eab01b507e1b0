package anthropic

import (
	"encoding/json"
)

type tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type fnTool struct {
	Type        string         `json:"type"`
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
	Strict      bool           `json:"strict"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
}

type reasoning struct {
	Effort  string `json:"effort"`
	Summary string `json:"summary,omitempty"`
}

// functionTools maps the client's tools to function tools; hosted Anthropic tools (web search
// and the like, which carry a type) are not served by the pool and are left out.
func functionTools(tools []tool, names *nameMap) []fnTool {
	var out []fnTool
	for _, t := range tools {
		if t.Type != "" && t.Type != "custom" {
			continue
		}
		out = append(out, fnTool{Type: "function", Name: names.short(t.Name), Description: t.Description,
			Parameters: normalizeSchema(t.InputSchema)})
	}
	return out
}

// normalizeSchema makes a JSON schema the backend takes: an object, with a type and properties,
// without $schema, cache_control and defer_loading.
func normalizeSchema(raw json.RawMessage) map[string]any {
	var s map[string]any
	if json.Unmarshal(raw, &s) != nil || s == nil {
		return map[string]any{"type": "object", "properties": map[string]any{}}
	}
	for _, k := range []string{"$schema", "cache_control", "defer_loading"} {
		delete(s, k)
	}
	if _, ok := s["type"]; !ok {
		s["type"] = "object"
	}
	if s["type"] == "object" {
		if _, ok := s["properties"]; !ok {
			s["properties"] = map[string]any{}
		}
	}
	return s
}

func mapToolChoice(c *toolChoice, names *nameMap) any {
	if c == nil {
		return nil
	}
	switch c.Type {
	case "any":
		return "required"
	case "none":
		return "none"
	case "tool":
		return map[string]string{"type": "function", "name": names.short(c.Name)}
	}
	return "auto"
}

// mapReasoning maps thinking to a reasoning effort; nil (the backend's default) without thinking.
func mapReasoning(t *thinking, oc *outputConfig) *reasoning {
	if t == nil {
		return nil
	}
	effort := "medium"
	switch t.Type {
	case "disabled":
		return &reasoning{Effort: "none"}
	case "adaptive", "auto":
		effort = "xhigh"
		if oc != nil && oc.Effort != "" && oc.Effort != "max" {
			effort = oc.Effort
		}
	case "enabled":
		if t.BudgetTokens != nil {
			effort = budgetEffort(*t.BudgetTokens)
		}
	}
	if effort == "none" {
		return &reasoning{Effort: effort}
	}
	return &reasoning{Effort: effort, Summary: "auto"}
}

func budgetEffort(n int) string {
	switch {
	case n <= 0:
		return "none"
	case n <= 512:
		return "minimal"
	case n <= 1024:
		return "low"
	case n <= 8192:
		return "medium"
	case n <= 24576:
		return "high"
	}
	return "xhigh"
}
