package codextest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A turn is what one response.create asks for, read from its input, tools and include.
type turn struct {
	prompt    string          // PromptOf the input: the seed of Answer
	lastUser  string          // the text of the last user message, where tool directives are read
	results   []toolResult    // function_call_output items not yet answered (see message)
	tools     map[string]bool // the function names the request declares
	reasoning bool            // include asks for reasoning.encrypted_content
	cached    float64         // the share of the serialized input found in the prompt cache
	format    string          // "json_schema" or "json_object": a structured output (structured.go)
	schema    map[string]any  // the json_schema format's schema
	images    int             // input_image parts in the input
	query     string          // the web search the last user message asks for (websearch.go)
	sources   bool            // include asks for web_search_call.action.sources
	items     int             // the input's items
	compact   bool            // the input ends with a compaction_trigger (compaction.go)
	compacted int             // compaction items the input sends back
}

// inputItem is the part of an input item a turn reads.
type inputItem struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Output           json.RawMessage `json:"output"`
	EncryptedContent *string         `json:"encrypted_content"`
}

// readTurn reads req. It fails, as the origin does, on a function_call_output without its
// function_call and on a reasoning item whose encrypted_content the server did not issue.
func readTurn(req *genRequest) (*turn, error) {
	t := &turn{prompt: promptOfInput(req.Input), tools: declaredTools(req.Tools)}
	t.format, t.schema = structuredFormat(req.Text)
	var include []string
	_ = json.Unmarshal(req.Include, &include) // unreadable = nothing included
	t.reasoning = slices.Contains(include, includeEncrypted)
	t.sources = slices.Contains(include, includeSources)
	var s string
	var items []inputItem
	switch {
	case json.Unmarshal(req.Input, &s) == nil:
		t.lastUser = s
	case json.Unmarshal(req.Input, &items) == nil:
		if err := t.readItems(items); err != nil {
			return t, err
		}
	}
	if declaresWebSearch(req.Tools) {
		t.query = searchQuery(t.lastUser)
	}
	return t, nil
}

func (t *turn) readItems(items []inputItem) error {
	calls := map[string]string{} // call_id -> name
	t.items = len(items)
	t.compact = len(items) > 0 && items[len(items)-1].Type == itemCompactionTrigger
	for _, it := range items {
		switch it.Type {
		case "", "message":
			t.message(it)
		case "function_call":
			calls[it.CallID] = it.Name
		case "function_call_output":
			name, ok := calls[it.CallID]
			if !ok {
				return fmt.Errorf("no tool call found for function call output with call_id %s", it.CallID)
			}
			t.results = append(t.results, toolResult{callID: it.CallID, name: name, output: outputText(it.Output)})
			t.images += countImages(it.Output)
		case "reasoning":
			if it.EncryptedContent != nil && !issuedEncrypted(*it.EncryptedContent) {
				return fmt.Errorf("the encrypted content %.20q could not be verified", *it.EncryptedContent)
			}
		case itemCompaction:
			if it.EncryptedContent == nil {
				return fmt.Errorf("a compaction item without encrypted_content")
			}
			if _, issued := CompactionSummary(*it.EncryptedContent); !issued {
				return fmt.Errorf("the compaction's encrypted content %.20q could not be verified", *it.EncryptedContent)
			}
			t.compacted++
		}
	}
	return nil
}

// message reads a message item. The tool results gathered so far are answered once the model
// has answered them with text (an assistant message) or the user asks again (a user message
// with a directive): a user message without one, such as the reminders some agents send with
// their tool results, keeps them. Developer and system messages (Claude Code sends its
// environment as one after the user's ask) are instructions, not the user's ask: they change
// neither.
func (t *turn) message(it inputItem) {
	t.images += countImages(it.Content)
	switch it.Role {
	case "assistant":
		t.results = nil
		return
	case "developer", "system":
		return
	}
	t.lastUser = messageText(it.Content)
	if strings.Contains(t.lastUser, toolDirective) {
		t.results = nil
	}
}

// messageText is the text of a message item's content: a string, or its input_text parts.
func messageText(content json.RawMessage) string {
	item, _ := json.Marshal([]inputItem{{Type: "message", Content: content}})
	return promptOfInput(item)
}

// decide says what the turn is answered with: text quoting its tool results, else the calls
// its directives (or, without one, defaults) ask for; ("", nil) means the Answer words. An ask
// that cannot be met is answered with text saying why.
func (t *turn) decide(defaults []ToolCall) (string, []ToolCall) {
	if len(t.results) > 0 {
		return resultsText(t.results), nil
	}
	calls, err := toolDirectives(t.lastUser)
	if err != nil {
		return "sim: " + err.Error(), nil
	}
	if len(calls) == 0 && t.query == "" {
		calls = defaults
	}
	if len(calls) == 0 {
		return "", nil // the Answer words, or a search (t.query)
	}
	if name := undeclared(calls, t.tools); name != "" {
		return fmt.Sprintf("sim: tool %q is not declared in the request's tools", name), nil
	}
	return "", calls
}

// countImages counts the input_image parts of a message's content or a call's output.
func countImages(content json.RawMessage) int {
	var parts []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return 0
	}
	n := 0
	for _, p := range parts {
		if p.Type == "input_image" {
			n++
		}
	}
	return n
}
