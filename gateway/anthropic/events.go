package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/codexpool/codexpool/gateway/wire"
)

// usageOut is Anthropic's usage: input_tokens without the cached ones, which are
// cache_read_input_tokens; the backend has no cache-write figure.
type usageOut struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	// ServerToolUse counts the web searches of an answer that made any.
	ServerToolUse *serverToolUse `json:"server_tool_use,omitempty"`
}

type serverToolUse struct {
	WebSearchRequests int `json:"web_search_requests"`
}

// withSearches is u with n web searches counted, if any.
func (u usageOut) withSearches(n int) usageOut {
	if n > 0 {
		u.ServerToolUse = &serverToolUse{WebSearchRequests: n}
	}
	return u
}

func mapUsage(u *wire.Usage) usageOut {
	if u == nil {
		return usageOut{}
	}
	cached := u.InputTokensDetails.CachedTokens
	return usageOut{InputTokens: max(u.InputTokens-cached, 0), CacheReadInputTokens: cached, OutputTokens: u.OutputTokens}
}

// stopReason is the Anthropic stop_reason of a finished response.
func stopReason(sawTool bool, typ string, r *wire.Response) string {
	reason := ""
	if r != nil && r.IncompleteDetails != nil {
		reason = r.IncompleteDetails.Reason
	}
	switch {
	case sawTool:
		return "tool_use"
	case reason == "content_filter":
		return "refusal"
	case typ == "response.incomplete", reason != "", r != nil && r.Status == "incomplete":
		return "max_tokens"
	}
	return "end_turn"
}

// messageText joins a message item's output text.
func messageText(it *wire.Item) string {
	var b strings.Builder
	for _, c := range it.Content {
		if c.Type == "output_text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// summaryText joins a reasoning item's summary parts with blank lines.
func summaryText(it *wire.Item) string {
	parts := make([]string, 0, len(it.Summary))
	for _, s := range it.Summary {
		parts = append(parts, s.Text)
	}
	return strings.Join(parts, "\n\n")
}

// failure is the Anthropic error of an "error" or "response.failed" event.
func failure(e *wire.Event) *Error {
	code, msg := e.Code, e.Message
	if e.Response != nil && e.Response.Error != nil {
		code, msg = e.Response.Error.Code, e.Response.Error.Message
	}
	if e.Error != nil {
		code, msg = firstNonEmpty(e.Error.Code, e.Error.Type), e.Error.Message
	}
	if msg == "" {
		msg = "the origin failed the response"
		if code != "" {
			msg += " (" + code + ")"
		}
	}
	status := e.Status
	if status == 0 {
		status = 500
	}
	return FromStatus(status, code, msg, 0)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type obj = map[string]any

func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
