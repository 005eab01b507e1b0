package chat

import (
	"encoding/json"
	"fmt"

	"github.com/codexpool/codexpool/gateway/wire"
)

// message is one entry of messages[].
type message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"` // a string, an array of parts, or null
	ToolCalls  []toolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// part is one content part of a message.
type part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	File struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
}

// input maps messages[] to the instructions and the input items.
func input(n wire.Names, msgs []message) (string, []any, error) {
	var system []string
	items := make([]any, 0, len(msgs))
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			s, err := plainText(m.Content, at)
			if err != nil {
				return "", nil, err
			}
			system = append(system, s)
		case "user":
			it, err := userItem(m.Content, at)
			if err != nil {
				return "", nil, err
			}
			items = append(items, it)
		case "assistant":
			its, err := assistantItems(n, m, at)
			if err != nil {
				return "", nil, err
			}
			items = append(items, its...)
		case "tool":
			out, err := plainText(m.Content, at)
			if err != nil {
				return "", nil, err
			}
			if m.ToolCallID == "" {
				return "", nil, refuse(at+".tool_call_id", "a tool message must name the call it answers")
			}
			items = append(items, wire.NewFunctionCallOutput(m.ToolCallID, out))
		default:
			return "", nil, refuse(at+".role", "must be system, developer, user, assistant or tool, not %q", m.Role)
		}
	}
	if len(items) == 0 {
		return "", nil, refuse("messages", "must hold a user, assistant or tool message, not only system ones")
	}
	return joinText(system), items, nil
}

// parts reads content as a string (one text part) or an array of parts; null is no parts.
func parts(content json.RawMessage, at string) ([]part, error) {
	if len(content) == 0 || string(content) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []part{{Type: "text", Text: s}}, nil
	}
	var ps []part
	if err := json.Unmarshal(content, &ps); err != nil {
		return nil, refuse(at+".content", "must be a string or an array of content parts")
	}
	return ps, nil
}

// plainText joins the text parts of content: an image or a file is refused (it cannot be carried
// as text), a part of a type unknown here stands as wire.Unsupported.
func plainText(content json.RawMessage, at string) (string, error) {
	ps, err := parts(content, at)
	if err != nil {
		return "", err
	}
	var s string
	for j, p := range ps {
		switch p.Type {
		case "text":
		case "image_url", "file":
			return "", refuse(fmt.Sprintf("%s.content[%d].type", at, j), "this message takes text parts only, not %q", p.Type)
		default:
			p.Text = wire.Unsupported(p.Type).Text
		}
		s += p.Text
	}
	return s, nil
}

// userItem maps a user message to a message item with input parts.
func userItem(content json.RawMessage, at string) (wire.Message, error) {
	ps, err := parts(content, at)
	if err != nil {
		return wire.Message{}, err
	}
	out := make([]wire.Part, 0, len(ps))
	for _, p := range ps {
		switch p.Type {
		case "text":
			out = append(out, wire.Text("input_text", p.Text))
		case "image_url":
			out = append(out, wire.Image(p.ImageURL.URL, p.ImageURL.Detail))
		case "file":
			out = append(out, wire.File(p.File.FileData, p.File.FileID, p.File.Filename))
		default:
			out = append(out, wire.Unsupported(p.Type))
		}
	}
	if len(out) == 0 {
		return wire.Message{}, refuse(at+".content", "a user message needs content")
	}
	return wire.NewMessage("user", out), nil
}

// assistantItems maps an assistant message to an output_text message (when it has text) and a
// function_call item per tool call.
func assistantItems(n wire.Names, m message, at string) ([]any, error) {
	ps, err := parts(m.Content, at)
	if err != nil {
		return nil, err
	}
	var items []any
	var content []wire.Part
	for _, p := range ps {
		switch p.Type {
		case "text":
			if p.Text != "" { // clients send "content": "" beside tool_calls
				content = append(content, wire.Text("output_text", p.Text))
			}
		case "refusal":
			content = append(content, wire.Text("output_text", p.Refusal))
		default:
			content = append(content, wire.Text("output_text", wire.Unsupported(p.Type).Text))
		}
	}
	if len(content) > 0 {
		items = append(items, wire.NewMessage("assistant", content))
	}
	for j, tc := range m.ToolCalls {
		if tc.ID == "" || tc.Function.Name == "" {
			return nil, refuse(fmt.Sprintf("%s.tool_calls[%d]", at, j), "a tool call needs an id and a function name")
		}
		items = append(items, wire.NewFunctionCall(tc.ID, n.Upstream(tc.Function.Name), tc.Function.Arguments))
	}
	return items, nil
}
