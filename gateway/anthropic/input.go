package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/codexpool/codexpool/gateway/wire"
)

// block is one content block of a message, of any type.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    *source         `json:"source"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
}

type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

// inputBuilder collects input items; text parts wait in pending until an item of another kind
// (a call, a call's output, reasoning) or the next message flushes them, so order is kept.
type inputBuilder struct {
	names   wire.Names
	items   []any
	role    string
	pending []wire.Part
}

// inputItems maps the conversation to Responses input items.
func inputItems(msgs []message, names wire.Names) ([]any, error) {
	b := &inputBuilder{names: names}
	for i, m := range msgs {
		if err := b.message(m); err != nil {
			return nil, badRequest("messages." + strconv.Itoa(i) + ": " + err.Error())
		}
	}
	b.flush()
	if len(b.items) == 0 {
		return nil, badRequest("messages: no content to send")
	}
	return b.items, nil
}

func (b *inputBuilder) message(m message) error {
	b.flush()
	b.role = m.Role
	switch m.Role {
	case "system":
		// Mid-conversation system text: the backend refuses role system.
		b.role = "developer"
	case "user", "assistant":
	default:
		return fmt.Errorf("role %q is not user or assistant", m.Role)
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		b.text(s)
		return nil
	}
	var blocks []block
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return errors.New("content must be a string or an array of content blocks")
	}
	for _, bl := range blocks {
		b.block(bl)
	}
	return nil
}

func (b *inputBuilder) block(bl block) {
	switch bl.Type {
	case "text":
		b.text(bl.Text)
	case "image":
		b.pending = append(b.pending, imagePart(bl.Source))
	case "document":
		if bl.Source != nil && bl.Source.Type == "base64" {
			b.pending = append(b.pending, wire.File("data:"+bl.Source.MediaType+";base64,"+bl.Source.Data, "", "document.pdf"))
		}
	case "tool_use":
		b.flush()
		args := ""
		if len(bl.Input) > 0 && string(bl.Input) != "null" {
			args = string(bl.Input)
		}
		b.items = append(b.items, wire.NewFunctionCall(bl.ID, b.names.Upstream(bl.Name), args))
	case "tool_result":
		b.flush()
		b.items = append(b.items, wire.NewFunctionCallOutput(bl.ToolUseID, toolOutput(bl)))
	case "thinking":
		if item, ok := decodeSignature(bl.Signature); ok {
			b.flush()
			b.items = append(b.items, item)
		}
	case "server_tool_use":
		if bl.Name != serverToolName {
			b.pending = append(b.pending, wire.Unsupported(bl.Type))
		} else if item, ok := searchInput(bl); ok {
			b.flush()
			b.items = append(b.items, item)
		}
	case "web_search_tool_result":
		// What a search found: the assistant text after it says what the model took from it.
	case "redacted_thinking":
		// Another model's thinking: nothing the origin can read.
	default:
		b.pending = append(b.pending, wire.Unsupported(bl.Type))
	}
}

func (b *inputBuilder) text(s string) {
	if s == "" {
		return
	}
	typ := "input_text"
	if b.role == "assistant" {
		typ = "output_text"
	}
	b.pending = append(b.pending, wire.Text(typ, s))
}

// flush makes the pending parts one message item.
func (b *inputBuilder) flush() {
	if len(b.pending) == 0 {
		return
	}
	b.items = append(b.items, wire.NewMessage(b.role, b.pending))
	b.pending = nil
}

func imagePart(s *source) wire.Part {
	if s == nil || s.Type != "base64" {
		return wire.Text("input_text", "[image omitted: url]")
	}
	return wire.Image("data:"+s.MediaType+";base64,"+s.Data, "")
}

// toolOutput is a tool_result's output: a string, or input parts when it holds images.
func toolOutput(bl block) any {
	prefix := ""
	if bl.IsError {
		prefix = "[tool execution error] "
	}
	var s string
	if json.Unmarshal(bl.Content, &s) == nil || len(bl.Content) == 0 {
		return prefix + s
	}
	var blocks []block
	_ = json.Unmarshal(bl.Content, &blocks)
	var texts []string
	var parts []wire.Part
	hasImage := false
	for _, c := range blocks {
		switch c.Type {
		case "text":
			texts = append(texts, c.Text)
			parts = append(parts, wire.Text("input_text", c.Text))
		case "image":
			hasImage = true
			parts = append(parts, imagePart(c.Source))
		default:
			p := wire.Unsupported(c.Type)
			texts = append(texts, p.Text)
			parts = append(parts, p)
		}
	}
	if !hasImage {
		return prefix + strings.Join(texts, "\n")
	}
	if prefix != "" {
		parts = append([]wire.Part{wire.Text("input_text", prefix)}, parts...)
	}
	return parts
}
