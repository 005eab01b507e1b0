package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Response is the Go form of response.schema.json: the one-shot reply, a Responses API
// response object plus output_text. Fields the Go client does not need are not decoded.
type Response struct {
	ID     string `json:"id"`
	Object string `json:"object,omitempty"` // "response"
	// Status is "completed" in a reply; "failed", "incomplete" or "in_progress" in events.
	Status string       `json:"status"`
	Model  string       `json:"model,omitempty"`
	Output []OutputItem `json:"output"`
	// OutputText is the text of every output_text part of every message item, joined.
	// Set in one-shot replies; empty in the response of streamed events (see Text).
	OutputText        string             `json:"output_text"`
	Usage             *Usage             `json:"usage,omitempty"`
	Error             *ResponseError     `json:"error,omitempty"`              // set when Status is "failed"
	IncompleteDetails *IncompleteDetails `json:"incomplete_details,omitempty"` // set when Status is "incomplete"
}

// OutputItem is one item of Response.Output, and the item of an output_item event: a message
// (Content), a function_call (CallID, Name, Arguments) or reasoning (Summary, EncryptedContent).
// Other types carry more fields, not decoded.
type OutputItem struct {
	ID      string        `json:"id,omitempty"`
	Type    string        `json:"type"`
	Role    string        `json:"role,omitempty"`
	Status  string        `json:"status,omitempty"`
	Content []ContentPart `json:"content,omitempty"`

	CallID           string        `json:"call_id,omitempty"`
	Name             string        `json:"name,omitempty"`
	Arguments        string        `json:"arguments,omitempty"`
	EncryptedContent string        `json:"encrypted_content,omitempty"`
	Summary          []SummaryPart `json:"summary,omitempty"`
}

// ContentPart is one part of an OutputItem's content, e.g. {"type":"output_text","text":"Hi"},
// or a refusal.
type ContentPart struct {
	Type    string `json:"type"`
	Text    string `json:"text,omitempty"`
	Refusal string `json:"refusal,omitempty"`
}

// SummaryPart is one part of a reasoning item's summary.
type SummaryPart struct {
	Text string `json:"text"`
}

// Usage holds the token counts the origin reports.
type Usage struct {
	InputTokens         int64               `json:"input_tokens"`
	OutputTokens        int64               `json:"output_tokens"`
	TotalTokens         int64               `json:"total_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
}

// InputTokensDetails is usage.input_tokens_details: the input tokens read from the prompt cache.
type InputTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// OutputTokensDetails is usage.output_tokens_details: the output tokens spent reasoning.
type OutputTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// ResponseError is the error of a failed response (response.failed) or of an error event.
type ResponseError struct {
	Type    string `json:"type,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete (response.incomplete).
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// Text returns OutputText when set, otherwise the text of every output_text part of every
// message item of Output, concatenated with no separator (what OutputText would be).
func (r *Response) Text() string {
	if r.OutputText != "" {
		return r.OutputText
	}
	var b strings.Builder
	for _, it := range r.Output {
		if it.Type != "message" {
			continue
		}
		for _, p := range it.Content {
			if p.Type == "output_text" {
				b.WriteString(p.Text)
			}
		}
	}
	return b.String()
}

// Event is one message of a streamed reply (event.schema.json), decoded as far as a client
// usually needs: the type, the text of output_text deltas, and the response of the
// response.* lifecycle events; for the gateway's translations also the item an event is about
// and its function-call arguments; and the pool's own error event (Status, Code, Message).
// Unknown types should be ignored.
type Event struct {
	Type           string    `json:"type"`
	SequenceNumber *int64    `json:"sequence_number,omitempty"`
	Delta          string    `json:"delta,omitempty"`    // response.output_text.delta and the other deltas
	Response       *Response `json:"response,omitempty"` // response.created, ... response.completed

	OutputIndex *int        `json:"output_index,omitempty"`
	ItemID      string      `json:"item_id,omitempty"`
	Item        *OutputItem `json:"item,omitempty"`      // response.output_item.added and .done
	Name        string      `json:"name,omitempty"`      // response.function_call_arguments.done
	Arguments   string      `json:"arguments,omitempty"` // response.function_call_arguments.done

	// Status, Code and Message are the pool's error event (the status it would answer); Error
	// the origin's.
	Status  int            `json:"status,omitempty"`
	Code    string         `json:"code,omitempty"`
	Message string         `json:"message,omitempty"`
	Error   *ResponseError `json:"error,omitempty"`
}

// CompletedResponse returns the raw "response" object of event when event is a
// response.completed event with a response object; ok is false for every other event. Only the
// completed event is decoded: the check for its type costs one scan of the other events.
func CompletedResponse(event []byte) (response json.RawMessage, ok bool) {
	if !bytes.Contains(event, []byte(`"response.completed"`)) {
		return nil, false
	}
	var ev struct {
		Type     string          `json:"type"`
		Response json.RawMessage `json:"response"`
	}
	if json.Unmarshal(event, &ev) != nil || ev.Type != "response.completed" {
		return nil, false
	}
	if r := bytes.Trim(ev.Response, " \t\r\n"); len(r) == 0 || r[0] != '{' {
		return nil, false
	}
	return ev.Response, true
}

// WithOutputText returns the response object of a response.completed event with an
// "output_text" field added when it has none: the text of every output_text content part of
// every message item of "output", concatenated with no separator (as the OpenAI SDKs do).
// The rest of the object is kept byte for byte: the field is appended before the closing
// brace. When output_text is already present, response itself is returned. Malformed items
// in output are skipped; an error means response is not a JSON object.
func WithOutputText(response []byte) ([]byte, error) {
	trimmed := bytes.Trim(response, " \t\r\n") // JSON whitespace only
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("schemas: WithOutputText: response is not a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return nil, fmt.Errorf("schemas: WithOutputText: %w", err)
	}
	if _, ok := fields["output_text"]; ok {
		return response, nil
	}
	text := joinOutputText(fields["output"])

	var enc bytes.Buffer
	e := json.NewEncoder(&enc)
	e.SetEscapeHTML(false)
	_ = e.Encode(text) // a string always encodes
	quoted := bytes.TrimSuffix(enc.Bytes(), []byte("\n"))

	body := trimmed[:len(trimmed)-1] // without the closing brace
	out := make([]byte, 0, len(body)+len(quoted)+18)
	out = append(out, body...)
	if len(fields) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"output_text":`...)
	out = append(out, quoted...)
	return append(out, '}'), nil
}

// joinOutputText concatenates the output_text parts of the message items in raw (the
// "output" array), skipping whatever does not have the expected shape.
func joinOutputText(raw json.RawMessage) string {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return ""
	}
	var b strings.Builder
	for _, rawItem := range items {
		var it struct {
			Type    string            `json:"type"`
			Content []json.RawMessage `json:"content"`
		}
		if json.Unmarshal(rawItem, &it) != nil || it.Type != "message" {
			continue
		}
		for _, rawPart := range it.Content {
			var p ContentPart
			if json.Unmarshal(rawPart, &p) == nil && p.Type == "output_text" {
				b.WriteString(p.Text)
			}
		}
	}
	return b.String()
}
