package anthropic

import (
	"encoding/json"
	"errors"
)

// Message turns a completed response object (the pool's one-shot reply) into one Anthropic
// message for a client that asked for model; names maps shortened tool names back.
func Message(resp []byte, model string, names map[string]string) ([]byte, error) {
	var r response
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, errors.New("anthropic: the pool's reply is not a response object: " + err.Error())
	}
	content := []any{}
	sawTool := false
	for i := range r.Output {
		b, isTool := outputBlocks(&r.Output[i], names)
		content = append(content, b...)
		sawTool = sawTool || isTool
	}
	id := r.ID
	if id == "" {
		id = "msg_codexpool"
	}
	return marshal(obj{"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": stopReason(sawTool, "", &r), "stop_sequence": nil, "usage": mapUsage(r.Usage)}), nil
}

// outputBlocks maps one output item to content blocks, and reports a named function call.
func outputBlocks(it *item, names map[string]string) ([]any, bool) {
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
		return []any{obj{"type": "tool_use", "id": it.CallID, "name": original(names, it.Name), "input": input}}, true
	}
	return nil, false
}
