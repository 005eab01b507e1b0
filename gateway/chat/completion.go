package chat

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/codexpool/codexpool/gateway/wire"
)

// Completion builds the one chat.completion object of a non-streamed request from the pool's
// events: the chunks a Stream makes of them, folded. It is not safe for concurrent use.
type Completion struct {
	s       *Stream
	content strings.Builder
	refusal strings.Builder
	texted  bool
	calls   []*ToolCall
	finish  string
	usage   *Usage
}

// NewCompletion returns the builder of req's answer, with id and created as NewStream's.
func NewCompletion(req *Request, id string, created time.Time) *Completion {
	s := NewStream(req, id, created)
	s.includeUsage = true
	return &Completion{s: s}
}

// Event takes one pool event.
func (c *Completion) Event(b []byte) {
	for _, ch := range c.s.Event(b) {
		c.fold(ch)
	}
}

// Done reports whether the terminal event was taken: JSON is then the whole answer.
func (c *Completion) Done() bool { return c.s.Done() }

func (c *Completion) fold(ch Chunk) {
	if ch.Usage != nil {
		c.usage = ch.Usage
	}
	for _, choice := range ch.Choices {
		d := choice.Delta
		if d.Content != nil && *d.Content != "" {
			c.texted = true
			c.content.WriteString(*d.Content)
		}
		if d.Refusal != nil {
			c.refusal.WriteString(*d.Refusal)
		}
		for _, tc := range d.ToolCalls {
			if tc.Index == len(c.calls) {
				c.calls = append(c.calls, &ToolCall{ID: tc.ID, Type: tc.Type, Function: FunctionCall{Name: tc.Function.Name}})
			}
			c.calls[tc.Index].Function.Arguments += tc.Function.Arguments
		}
		if choice.FinishReason != nil {
			c.finish = *choice.FinishReason
		}
	}
}

// ChatCompletion is the chat.completion object.
type ChatCompletion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"` // "chat.completion"
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage"`
}

// CompletionChoice is the one choice of a chat.completion.
type CompletionChoice struct {
	Index        int             `json:"index"`
	Message      Message         `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"` // always null
}

// Message is the assistant's message; Content is null when it only calls tools.
type Message struct {
	Role      string      `json:"role"`
	Content   *string     `json:"content"`
	Refusal   *string     `json:"refusal"`
	ToolCalls []*ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is one tool call of the message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function and its JSON-encoded arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Result returns the chat.completion of the events taken so far.
func (c *Completion) Result() ChatCompletion {
	m := Message{Role: "assistant", ToolCalls: c.calls}
	if c.texted || len(c.calls) == 0 {
		s := c.content.String()
		m.Content = &s
	}
	if c.refusal.Len() > 0 {
		r := c.refusal.String()
		m.Refusal = &r
	}
	h := c.s.head
	return ChatCompletion{ID: h.ID, Object: "chat.completion", Created: h.Created, Model: h.Model,
		Choices: []CompletionChoice{{Message: m, FinishReason: c.finish, Logprobs: json.RawMessage("null")}},
		Usage:   c.usage}
}

// JSON returns Result encoded.
func (c *Completion) JSON() []byte { return wire.MustMarshal(c.Result()) }
