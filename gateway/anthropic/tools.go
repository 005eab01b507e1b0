package anthropic

import (
	"encoding/json"

	"github.com/codexpool/codexpool/gateway/wire"
)

type tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
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

// functionTools maps the client's tools to function tools; hosted Anthropic tools (web search
// and the like, which carry a type) are not served by the pool and are left out.
func functionTools(tools []tool, names wire.Names) []wire.FunctionTool {
	var out []wire.FunctionTool
	for _, t := range tools {
		if t.Type != "" && t.Type != "custom" {
			continue
		}
		out = append(out, wire.Tool(names, t.Name, t.Description, t.InputSchema, false))
	}
	return out
}

func mapToolChoice(c *toolChoice, names wire.Names) json.RawMessage {
	if c == nil {
		return nil
	}
	switch c.Type {
	case "any":
		return json.RawMessage(`"required"`)
	case "none":
		return json.RawMessage(`"none"`)
	case "tool":
		return wire.MustMarshal(struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}{"function", names.Upstream(c.Name)})
	}
	return json.RawMessage(`"auto"`)
}

// mapReasoning maps thinking to a reasoning effort; nil (the backend's default) without thinking.
func mapReasoning(t *thinking, oc *outputConfig) *wire.Reasoning {
	if t == nil {
		return nil
	}
	effort := "medium"
	switch t.Type {
	case "disabled":
		return &wire.Reasoning{Effort: "none"}
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
		return &wire.Reasoning{Effort: effort}
	}
	return &wire.Reasoning{Effort: effort, Summary: "auto"}
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
