package codextest

import (
	"encoding/json"
	"hash/fnv"
	"strings"
)

// vocabulary is the fixed word list answers are drawn from. Changing it changes every Answer.
var vocabulary = [...]string{
	"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
	"india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
	"quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey", "xray",
	"yankee", "zulu", "amber", "basalt", "cobalt", "dune", "ember", "fjord",
	"granite", "harbor", "iris", "jade", "kelp", "lagoon", "meadow", "nectar",
	"onyx", "pebble", "quartz", "river", "summit", "tundra", "umber", "valley",
	"willow", "xenon", "yarrow", "zephyr", "anchor", "beacon", "canyon", "delta9",
	"estuary", "forest", "glacier", "hollow", "island", "jetty", "knoll", "ledge",
}

// AnswerPrefix starts every answer the server makes up, so nobody mistakes the simulator's
// words for a model's.
const AnswerPrefix = "[codexpool sim] "

// Answer returns the deterministic answer the server streams for prompt: AnswerPrefix, then words
// words from a fixed vocabulary, each chosen by hashing the prompt (FNV-1a) with the word's index,
// joined by single spaces. Each word is one response.output_text.delta (with a leading space
// except the first, which carries the prefix). words <= 0 gives "".
func Answer(prompt string, words int) string {
	if words <= 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(AnswerPrefix)
	h := promptHash(prompt)
	for i := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(wordAt(h, i))
	}
	return b.String()
}

func promptHash(prompt string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	return h.Sum64()
}

// wordAt mixes the prompt hash with the index (splitmix64 finaliser) so neighbouring indexes do
// not walk the vocabulary in order.
func wordAt(h uint64, i int) string {
	x := h + uint64(i+1)*0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return vocabulary[x%uint64(len(vocabulary))]
}

// PromptOf returns the prompt text the server derives from a response.create frame: the input when
// it is a string, else the text of every input_text part (or string content) of every message item
// of the input array, concatenated with no separator. It returns "" for anything it cannot read.
func PromptOf(frame []byte) string {
	var req struct {
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(frame, &req) != nil {
		return ""
	}
	return promptOfInput(req.Input)
}

func promptOfInput(input json.RawMessage) string {
	if len(input) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(input, &s) == nil {
		return s
	}
	var items []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(input, &items) != nil {
		return ""
	}
	var b strings.Builder
	for _, it := range items {
		if it.Type != "" && it.Type != "message" {
			continue
		}
		if json.Unmarshal(it.Content, &s) == nil {
			b.WriteString(s)
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(it.Content, &parts) != nil {
			continue
		}
		for _, p := range parts {
			if p.Type == "input_text" {
				b.WriteString(p.Text)
			}
		}
	}
	return b.String()
}
