package wire

import (
	"bytes"
	"encoding/json"
)

// Request is the Responses create body a translated request sends to the pool, members in a
// fixed order. Only what a dialect maps is here; Extra members of a Responses body the gateway
// does not read are not (the Responses route forwards its body as sent).
type Request struct {
	Model             string          `json:"model,omitempty"`
	Instructions      string          `json:"instructions"`
	Input             []any           `json:"input"`           // Message, FunctionCall, FunctionCallOutput, Reasoning
	Tools             []any           `json:"tools,omitempty"` // FunctionTool, WebSearchTool
	ToolChoice        json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	Reasoning         *Reasoning      `json:"reasoning,omitempty"`
	Text              *TextOptions    `json:"text,omitempty"`
	Include           []string        `json:"include,omitempty"`
	ServiceTier       string          `json:"service_tier,omitempty"`
	PromptCacheKey    string          `json:"prompt_cache_key,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
}

// Reasoning is the request's reasoning options.
type Reasoning struct {
	Effort  string `json:"effort"`
	Summary string `json:"summary,omitempty"`
}

// TextOptions is the request's text options: the output format (structured outputs) and the
// verbosity.
type TextOptions struct {
	Format    json.RawMessage `json:"format,omitempty"`
	Verbosity string          `json:"verbosity,omitempty"`
}

// Message is a message input item.
type Message struct {
	Type    string `json:"type"` // "message"
	Role    string `json:"role"`
	Content []Part `json:"content"`
}

// NewMessage is a message item of role with parts.
func NewMessage(role string, parts []Part) Message { return Message{"message", role, parts} }

// Part is one content part of a message: input_text / output_text (Text), input_image
// (ImageURL, a data URL or a URL, and Detail), input_file (FileData, FileID, Filename).
type Part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// Text is a text part of type typ (input_text or output_text).
func Text(typ, text string) Part { return Part{Type: typ, Text: text} }

// Image is an input_image part; url is a data URL or a URL.
func Image(url, detail string) Part { return Part{Type: "input_image", ImageURL: url, Detail: detail} }

// File is an input_file part.
func File(data, id, name string) Part {
	return Part{Type: "input_file", FileData: data, FileID: id, Filename: name}
}

// MarshalJSON leaves "text" out of the parts that are not text.
func (p Part) MarshalJSON() ([]byte, error) {
	type part Part
	if p.Type == "input_text" || p.Type == "output_text" {
		return marshal(part(p))
	}
	return marshal(struct {
		Type     string `json:"type"`
		ImageURL string `json:"image_url,omitempty"`
		Detail   string `json:"detail,omitempty"`
		FileData string `json:"file_data,omitempty"`
		FileID   string `json:"file_id,omitempty"`
		Filename string `json:"filename,omitempty"`
	}{p.Type, p.ImageURL, p.Detail, p.FileData, p.FileID, p.Filename})
}

// FunctionCall is a function_call input item: a call the model made earlier.
type FunctionCall struct {
	Type      string `json:"type"` // "function_call"
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// NewFunctionCall is a function_call item; the call id is shortened (ShortID), the name is the
// upstream one already, and empty arguments become "{}".
func NewFunctionCall(callID, name, args string) FunctionCall {
	if args == "" {
		args = "{}"
	}
	return FunctionCall{"function_call", ShortID(callID), name, args}
}

// FunctionCallOutput is a function_call_output input item: a string, or parts when the output
// holds images.
type FunctionCallOutput struct {
	Type   string `json:"type"` // "function_call_output"
	CallID string `json:"call_id"`
	Output any    `json:"output"` // string or []Part
}

// NewFunctionCallOutput is a function_call_output item; the call id is shortened (ShortID).
func NewFunctionCallOutput(callID string, output any) FunctionCallOutput {
	return FunctionCallOutput{"function_call_output", ShortID(callID), output}
}

// ReasoningItem is a reasoning input item replayed from an earlier turn.
type ReasoningItem struct {
	Type             string `json:"type"` // "reasoning"
	ID               string `json:"id,omitempty"`
	Summary          []any  `json:"summary"`
	EncryptedContent string `json:"encrypted_content"`
}

// FunctionTool is a Responses function tool.
type FunctionTool struct {
	Type        string          `json:"type"` // "function"
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// Tool is a function tool with its upstream name and its schema cleaned (ToolParameters).
func Tool(names Names, name, description string, parameters json.RawMessage, strict bool) FunctionTool {
	return FunctionTool{"function", names.Upstream(name), description, ToolParameters(parameters), strict}
}

// Marshal encodes v without HTML escaping: the origin reads the text as sent.
func Marshal(v any) ([]byte, error) { return marshal(v) }

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// MustMarshal is Marshal for values that always encode (this package's types, raw JSON).
func MustMarshal(v any) json.RawMessage {
	b, err := marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
