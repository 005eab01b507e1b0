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
	// The web search server tool's options (websearch.go).
	AllowedDomains []string           `json:"allowed_domains"`
	UserLocation   *wire.UserLocation `json:"user_location"`
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

// mapTools maps the client's tools: custom tools to function tools, the web search server tool
// to the Responses web_search tool (webSearchTool); other server tools (code execution, web
// fetch and the like) are not served by the pool and are left out.
func mapTools(tools []tool, names wire.Names) []any {
	var out []any
	for _, t := range tools {
		switch {
		case t.Type == "" || t.Type == "custom":
			out = append(out, wire.Tool(names, t.Name, t.Description, t.InputSchema, false))
		case isWebSearch(t.Type):
			out = append(out, webSearchTool(t))
		}
	}
	return out
}

func mapToolChoice(c *toolChoice, tools []tool, names wire.Names) json.RawMessage {
	if c == nil {
		return nil
	}
	if c.Type == "tool" {
		if choice, ok := webSearchChoice(c.Name, tools); ok {
			return choice
		}
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
