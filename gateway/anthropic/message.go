package anthropic

import (
	"encoding/json"
	"errors"

	"github.com/codexpool/codexpool/gateway/wire"
)

// Message turns a completed response object (the pool's one-shot reply) into one Anthropic
// message for a client that asked for model; names maps shortened tool names back.
func Message(resp []byte, model string, names wire.Names) ([]byte, error) {
	var r wire.Response
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, errors.New("anthropic: the pool's reply is not a response object: " + err.Error())
	}
	return messageOf(&r, wire.OutputItems(resp), "", model, names), nil
}

// Collector gathers a streamed response for a client that did not ask for a stream. Feed it
// every pool event; once Done, Message is the answer. Not safe for concurrent use.
type Collector struct {
	items    []wire.Item       // output items as they were done
	raws     []json.RawMessage // the same, raw (a web search's members are not in Item)
	terminal *wire.Response    // the response of the terminal event
	output   []json.RawMessage // its output items, raw
	typ      string            // the terminal event's type
}

// Event takes one pool event.
func (c *Collector) Event(ev []byte) {
	var e wire.Event
	if c.terminal != nil || json.Unmarshal(ev, &e) != nil {
		return
	}
	switch e.Type {
	case "response.output_item.done":
		if e.Item != nil {
			c.items = append(c.items, *e.Item)
			c.raws = append(c.raws, wire.EventItem(ev))
		}
	case "response.completed", "response.incomplete", "response.done":
		c.terminal, c.typ = e.Response, e.Type
		if c.terminal == nil {
			c.terminal = &wire.Response{}
		}
		var t struct {
			Response json.RawMessage `json:"response"`
		}
		_ = json.Unmarshal(ev, &t)
		c.output = wire.OutputItems(t.Response)
	}
}

// Done reports whether the terminal event (completed or incomplete) has come.
func (c *Collector) Done() bool { return c.terminal != nil }

// Message is the Anthropic message of the collected response; the output items streamed stand
// in for a terminal response that lists none.
func (c *Collector) Message(model string, names wire.Names) []byte {
	r := wire.Response{}
	if c.terminal != nil {
		r = *c.terminal
	}
	raws := c.output
	if len(r.Output) == 0 {
		r.Output, raws = c.items, c.raws
	}
	return messageOf(&r, raws, c.typ, model, names)
}

// messageOf is the message of r; raws are r.Output's items as sent, for what Item lacks.
func messageOf(r *wire.Response, raws []json.RawMessage, typ, model string, names wire.Names) []byte {
	content := []any{}
	sawTool := false
	searches := 0
	for i := range r.Output {
		if r.Output[i].Type == wire.TypeWebSearchCall {
			if len(raws) == len(r.Output) {
				content = append(content, searchBlocks(raws, i)...)
			}
			searches++
			continue
		}
		b, isTool := outputBlocks(&r.Output[i], names)
		content = append(content, b...)
		sawTool = sawTool || isTool
	}
	id := r.ID
	if id == "" {
		id = "msg_codexpool"
	}
	return marshal(obj{"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": stopReason(sawTool, typ, r), "stop_sequence": nil, "usage": mapUsage(r.Usage).withSearches(searches)})
}

// outputBlocks maps one output item to content blocks, and reports a named function call.
func outputBlocks(it *wire.Item, names wire.Names) ([]any, bool) {
	switch it.Type {
	case "reasoning":
		sig := encodeSignature(it.ID, it.EncryptedContent)
		text := summaryText(it)
		if sig == "" && text == "" {
			return nil, false
		}
		return []any{obj{"type": "thinking", "thinking": text, "signature": sig}}, false
	case "message":
		var out []any
		for _, c := range it.Content {
			if c.Type == "output_text" {
				out = append(out, obj{"type": "text", "text": c.Text})
			}
		}
		return out, false
	case "function_call":
		if it.Name == "" {
			return nil, false
		}
		var input any = obj{}
		var parsed map[string]any
		if json.Unmarshal([]byte(it.Arguments), &parsed) == nil && parsed != nil {
			input = parsed
		}
		return []any{obj{"type": "tool_use", "id": it.CallID, "name": names.Original(it.Name), "input": input}}, true
	}
	return nil, false
}
