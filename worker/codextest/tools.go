package codextest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Tool calls: a request asks for them with directives in the text of its last user message,
//
//	[sim:tool name=Bash args={"command":"echo hi > f.txt"}]
//
// one function_call output item per directive (several = parallel calls), or, without a
// directive, with Options.ToolCalls. A request whose input carries function_call_output items
// not yet answered (no assistant message and no user message with a directive after them) is
// answered with text quoting them instead, which ends the loop.

// A ToolCall is a function call the server answers with.
type ToolCall struct {
	// Name is the function's name; the request's tools must declare it.
	Name string
	// Arguments is the call's arguments, a JSON object as text. "" = "{}".
	Arguments string
}

func (tc ToolCall) arguments() string {
	if tc.Arguments == "" {
		return "{}"
	}
	return tc.Arguments
}

// toolDirective opens a tool directive in a user message's text.
const toolDirective = "[sim:tool "

// ParseToolCall parses the body of a directive, `name=NAME [args=JSON-OBJECT]`, as the
// --tool-call flag of `codexpool sim` takes it.
func ParseToolCall(s string) (ToolCall, error) {
	tc, n, err := parseDirective(s + "]")
	if err == nil && n != len(s)+1 {
		err = errors.New("text after the arguments")
	}
	if err != nil {
		return ToolCall{}, fmt.Errorf("codextest: tool call %q: %w", s, err)
	}
	return tc, nil
}

// validateToolCalls checks Options.ToolCalls: each has a name and, if any, object arguments.
func validateToolCalls(calls []ToolCall) error {
	for i, c := range calls {
		var obj map[string]any
		if c.Name == "" || strings.ContainsAny(c.Name, " ]") {
			return fmt.Errorf("ToolCalls[%d]: bad name %q", i, c.Name)
		}
		if c.Arguments != "" && json.Unmarshal([]byte(c.Arguments), &obj) != nil {
			return fmt.Errorf("ToolCalls[%d]: Arguments are not a JSON object", i)
		}
	}
	return nil
}

// toolDirectives returns the calls text's directives ask for, in order.
func toolDirectives(text string) ([]ToolCall, error) {
	var calls []ToolCall
	for {
		i := strings.Index(text, toolDirective)
		if i < 0 {
			return calls, nil
		}
		text = text[i+len(toolDirective):]
		tc, n, err := parseDirective(text)
		if err != nil {
			return nil, fmt.Errorf("bad tool directive: %w", err)
		}
		calls = append(calls, tc)
		text = text[n:]
	}
}

// parseDirective parses `name=NAME [args=JSON]]` from the start of s and returns the call and
// the bytes read, the closing bracket included.
func parseDirective(s string) (ToolCall, int, error) {
	rest := strings.TrimLeft(s, " ")
	name, ok := strings.CutPrefix(rest, "name=")
	if !ok {
		return ToolCall{}, 0, errors.New(`want name=NAME`)
	}
	end := strings.IndexAny(name, " ]")
	if end <= 0 {
		return ToolCall{}, 0, errors.New("want a name and a closing ]")
	}
	tc := ToolCall{Name: name[:end]}
	rest = strings.TrimLeft(name[end:], " ")
	if args, ok := strings.CutPrefix(rest, "args="); ok {
		dec := json.NewDecoder(strings.NewReader(args))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil || !bytes.HasPrefix(raw, []byte("{")) {
			return ToolCall{}, 0, errors.New("args must be a JSON object")
		}
		var buf bytes.Buffer
		_ = json.Compact(&buf, raw)
		tc.Arguments = buf.String()
		rest = strings.TrimLeft(args[dec.InputOffset():], " ")
	}
	if !strings.HasPrefix(rest, "]") {
		return ToolCall{}, 0, errors.New("want a closing ]")
	}
	return tc, len(s) - len(rest) + 1, nil
}

// toolResult is a function_call_output the request sends back.
type toolResult struct {
	callID, name, output string
}

// resultsText is the answer to a request that sends tool results back: each output quoted.
func resultsText(rs []toolResult) string {
	lines := make([]string, len(rs))
	for i, r := range rs {
		lines[i] = fmt.Sprintf("Tool %s returned: %s", r.name, r.output)
	}
	return strings.Join(lines, "\n")
}

// declaredTools returns the names a request's tools list declares: {"type":"function","name"}
// as the Responses API has it, or {"function":{"name"}} as chat completions do.
func declaredTools(raw json.RawMessage) map[string]bool {
	var tools []struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	_ = json.Unmarshal(raw, &tools) // an unreadable list declares nothing
	names := make(map[string]bool, len(tools))
	for _, t := range tools {
		names[t.Name] = true
		names[t.Function.Name] = true
	}
	delete(names, "")
	return names
}

// undeclared returns the first call whose name tools does not declare, or "".
func undeclared(calls []ToolCall, tools map[string]bool) string {
	for _, c := range calls {
		if !tools[c.Name] {
			return c.Name
		}
	}
	return ""
}

// outputText reads a function_call_output's output: a string, or the text of its parts.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

const (
	evArgsDelta = "response.function_call_arguments.delta"
	evArgsDone  = "response.function_call_arguments.done"
)

type callItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type argsEvent struct {
	evHead
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta,omitempty"`
	Name        string `json:"name,omitempty"`
	Arguments   string `json:"arguments,omitempty"`
}

// argsChunk is the most bytes of arguments one delta carries.
const argsChunk = 8

// call adds function call i of the response, its arguments streamed in chunks, and returns
// its output tokens (one per chunk).
func (b *stepBuilder) call(i int, tc ToolCall) int {
	suffix := b.id + "_" + strconv.Itoa(i)
	idx := b.nextIndex()
	item := callItem{ID: "fc_sim" + suffix, Type: "function_call", Status: "in_progress", CallID: "call_sim" + suffix, Name: tc.Name}
	b.add(0, &itemEvent{evHead: evHead{Type: evItemAdded}, OutputIndex: idx, Item: item})
	args := tc.arguments()
	chunks := splitChunks(args, argsChunk)
	for _, c := range chunks {
		b.add(0, &argsEvent{evHead: evHead{Type: evArgsDelta}, ItemID: item.ID, OutputIndex: idx, Delta: c})
	}
	b.add(0, &argsEvent{evHead: evHead{Type: evArgsDone}, ItemID: item.ID, OutputIndex: idx, Name: tc.Name, Arguments: args})
	item.Status, item.Arguments = "completed", args
	b.add(0, &itemEvent{evHead: evHead{Type: evItemDone}, OutputIndex: idx, Item: item})
	b.output = append(b.output, item)
	return len(chunks)
}

// splitChunks cuts s into pieces of about n bytes, never inside a UTF-8 sequence.
func splitChunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
