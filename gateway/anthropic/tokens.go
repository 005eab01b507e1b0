package anthropic

import (
	"encoding/json"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// perItem approximates the tokens the backend's chat format adds around each input item.
const perItem = 4

var o200k = sync.OnceValues(func() (tokenizer.Codec, error) { return tokenizer.Get(tokenizer.O200kBase) })

// CountTokens counts the input tokens of a translated body (Translated.Body) with the o200k
// encoding: instructions, every input item's text, call arguments and outputs, and the tool
// definitions, plus a few tokens per item. It generates nothing.
func CountTokens(body []byte) (int, error) {
	codec, err := o200k()
	if err != nil {
		return 0, err
	}
	var req struct {
		Instructions string            `json:"instructions"`
		Input        []json.RawMessage `json:"input"`
		Tools        json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, err
	}
	n := 0
	count := func(s string) {
		if s != "" {
			c, _ := codec.Count(s)
			n += c
		}
	}
	count(req.Instructions)
	for _, it := range req.Input {
		n += perItem
		for _, s := range itemStrings(it) {
			count(s)
		}
	}
	if len(req.Tools) > 0 && string(req.Tools) != "null" {
		count(string(req.Tools))
	}
	return n, nil
}

// itemStrings lists the strings of an input item a model reads: texts, names, arguments, outputs.
func itemStrings(raw json.RawMessage) []string {
	var it struct {
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Output    json.RawMessage `json:"output"`
		Content   []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(raw, &it)
	out := []string{it.Name, it.Arguments}
	var s string
	if json.Unmarshal(it.Output, &s) == nil {
		out = append(out, s)
	} else if len(it.Output) > 0 {
		out = append(out, string(it.Output))
	}
	for _, c := range it.Content {
		out = append(out, c.Text)
	}
	return out
}
