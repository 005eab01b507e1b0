package chat

import (
	"encoding/json"
	"fmt"
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

// Responses input items and parts.
type (
	msgItem struct {
		Type    string            `json:"type"`
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	}
	textPart struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	imagePart struct {
		Type     string `json:"type"`
		ImageURL string `json:"image_url"`
		Detail   string `json:"detail,omitempty"`
	}
	filePart struct {
		Type     string `json:"type"`
		FileData string `json:"file_data,omitempty"`
		FileID   string `json:"file_id,omitempty"`
		Filename string `json:"filename,omitempty"`
	}
	callItem struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	outputItem struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
)

// input maps messages[] to the instructions and the input items.
func (n names) input(msgs []message) (string, []json.RawMessage, error) {
	var system []string
	items := make([]json.RawMessage, 0, len(msgs))
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
			its, err := n.assistantItems(m, at)
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
			items = append(items, mustMarshal(outputItem{"function_call_output", shortID(m.ToolCallID), out}))
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

// plainText joins the text parts of content; other parts are refused.
func plainText(content json.RawMessage, at string) (string, error) {
	ps, err := parts(content, at)
	if err != nil {
		return "", err
	}
	var s string
	for j, p := range ps {
		if p.Type != "text" {
			return "", refuse(fmt.Sprintf("%s.content[%d].type", at, j), "this message takes text parts only, not %q", p.Type)
		}
		s += p.Text
	}
	return s, nil
}

// userItem maps a user message to a message item with input parts.
func userItem(content json.RawMessage, at string) (json.RawMessage, error) {
	ps, err := parts(content, at)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(ps))
	for j, p := range ps {
		switch p.Type {
		case "text":
			out = append(out, mustMarshal(textPart{"input_text", p.Text}))
		case "image_url":
			out = append(out, mustMarshal(imagePart{"input_image", p.ImageURL.URL, p.ImageURL.Detail}))
		case "file":
			out = append(out, mustMarshal(filePart{"input_file", p.File.FileData, p.File.FileID, p.File.Filename}))
		default:
			return nil, refuse(fmt.Sprintf("%s.content[%d].type", at, j), "must be text, image_url or file, not %q", p.Type)
		}
	}
	if len(out) == 0 {
		return nil, refuse(at+".content", "a user message needs content")
	}
	return mustMarshal(msgItem{"message", "user", out}), nil
}

// assistantItems maps an assistant message to an output_text message (when it has text) and a
// function_call item per tool call.
func (n names) assistantItems(m message, at string) ([]json.RawMessage, error) {
	ps, err := parts(m.Content, at)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	var content []json.RawMessage
	for j, p := range ps {
		switch p.Type {
		case "text":
			if p.Text != "" { // clients send "content": "" beside tool_calls
				content = append(content, mustMarshal(textPart{"output_text", p.Text}))
			}
		case "refusal":
			content = append(content, mustMarshal(textPart{"output_text", p.Refusal}))
		default:
			return nil, refuse(fmt.Sprintf("%s.content[%d].type", at, j), "must be text or refusal, not %q", p.Type)
		}
	}
	if len(content) > 0 {
		items = append(items, mustMarshal(msgItem{"message", "assistant", content}))
	}
	for j, tc := range m.ToolCalls {
		if tc.ID == "" || tc.Function.Name == "" {
			return nil, refuse(fmt.Sprintf("%s.tool_calls[%d]", at, j), "a tool call needs an id and a function name")
		}
		args := tc.Function.Arguments
		if args == "" {
			args = "{}"
		}
		items = append(items, mustMarshal(callItem{"function_call", shortID(tc.ID), n.upstream(tc.Function.Name), args}))
	}
	return items, nil
}
