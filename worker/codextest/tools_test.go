package codextest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

func TestParseToolCall(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ToolCall
		wantErr bool
	}{
		{name: "name only", in: "name=Bash", want: ToolCall{Name: "Bash"}},
		{name: "args", in: `name=Bash args={"command": "echo hi > f.txt"}`, want: ToolCall{Name: "Bash", Arguments: `{"command":"echo hi > f.txt"}`}},
		{name: "bracket inside args", in: `name=Bash args={"command":"echo [x]"}`, want: ToolCall{Name: "Bash", Arguments: `{"command":"echo [x]"}`}},
		{name: "no name", in: `args={}`, wantErr: true},
		{name: "args not an object", in: `name=Bash args=[1]`, wantErr: true},
		{name: "bad json", in: `name=Bash args={"a":`, wantErr: true},
		{name: "text after", in: `name=Bash args={} more`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseToolCall(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseToolCall(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestToolDirectives(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []ToolCall
		wantErr bool
	}{
		{name: "none", text: "Say hello"},
		{name: "one", text: `Run it [sim:tool name=Bash args={"command":"ls"}] please`, want: []ToolCall{{"Bash", `{"command":"ls"}`}}},
		{name: "parallel", text: `[sim:tool name=Read args={"path":"a"}][sim:tool name=Read args={"path":"b"}]`,
			want: []ToolCall{{"Read", `{"path":"a"}`}, {"Read", `{"path":"b"}`}}},
		{name: "unclosed", text: `[sim:tool name=Bash args={}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := toolDirectives(tt.text)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("toolDirectives = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// toolFrame is a response.create with input items, tools declared and extra fields.
func toolFrame(input []any, tools []string, extra map[string]any) []byte {
	decl := []any{}
	for _, n := range tools {
		decl = append(decl, map[string]any{"type": "function", "name": n, "parameters": map[string]any{"type": "object"}})
	}
	req := map[string]any{"type": "response.create", "model": "gpt-5.1-codex", "instructions": "Be brief.",
		"input": input, "tools": decl, "store": false, "stream": true}
	for k, v := range extra {
		req[k] = v
	}
	b, _ := json.Marshal(req)
	return b
}

func userMsg(text string) map[string]any {
	return map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": text}}}
}

// calls returns the function_call items of a response.completed, and checks each against its
// streamed events: the arguments deltas concatenate to the arguments of done and of the item.
func calls(t *testing.T, evs []event) []map[string]any {
	t.Helper()
	last := evs[len(evs)-1]
	if last.typ() != evCompleted {
		t.Fatalf("last event %s, want response.completed", last.raw)
	}
	var out []map[string]any
	for _, it := range last.get("response.output").([]any) {
		if m := it.(map[string]any); m["type"] == "function_call" {
			out = append(out, m)
		}
	}
	for i, item := range out {
		var deltas strings.Builder
		var done string
		for _, e := range evs {
			if e.get("item_id") != item["id"] {
				continue
			}
			switch e.typ() {
			case evArgsDelta:
				deltas.WriteString(e.get("delta").(string))
			case evArgsDone:
				done = e.get("arguments").(string)
			}
		}
		if deltas.String() != item["arguments"] || done != item["arguments"] {
			t.Errorf("call %d: deltas %q, done %q, item arguments %q; want all equal", i, deltas.String(), done, item["arguments"])
		}
	}
	return out
}

func TestToolCallRoundTrip(t *testing.T) {
	s := newServer(t, Options{Words: 3})
	c := mustDial(t, s)
	ask := userMsg(`Write the file. [sim:tool name=Bash args={"command":"echo hi > f.txt"}]`)
	evs := readResponseOf(t, c, toolFrame([]any{ask}, []string{"Bash"}, nil))
	want := []string{evCreated, evInProgress, evItemAdded}
	if got := types(evs)[:3]; !slices.Equal(got, want) {
		t.Fatalf("events start %v, want %v", got, want)
	}
	if evs[2].get("item.type") != "function_call" || evs[2].get("item.name") != "Bash" || evs[2].get("item.arguments") != "" {
		t.Errorf("output_item.added %s, want a function_call named Bash with empty arguments", evs[2].raw)
	}
	got := calls(t, evs)
	if len(got) != 1 || got[0]["name"] != "Bash" || got[0]["arguments"] != `{"command":"echo hi > f.txt"}` || got[0]["status"] != "completed" {
		t.Fatalf("calls %v, want one completed Bash call with the directive's arguments", got)
	}
	if n := strings.Count(strings.Join(types(evs), " "), evArgsDelta); n < 2 {
		t.Errorf("%d arguments deltas, want the arguments streamed in several", n)
	}
	callID := got[0]["call_id"].(string)

	back := []any{ask,
		map[string]any{"type": "function_call", "call_id": callID, "name": "Bash", "arguments": got[0]["arguments"]},
		map[string]any{"type": "function_call_output", "call_id": callID, "output": "hi from the tool"}}
	evs = readResponseOf(t, c, toolFrame(back, []string{"Bash"}, nil))
	if txt := textOf(evs); txt != "Tool Bash returned: hi from the tool" {
		t.Errorf("answer to the tool output %q, want it quoted", txt)
	}
	if len(calls(t, evs)) != 0 {
		t.Error("the answer to a tool output asks for a tool again")
	}
}

// readResponseOf sends frame on c and reads the response to it.
func readResponseOf(t *testing.T, c *websocket.Conn, frame []byte) []event {
	t.Helper()
	send(t, c, frame)
	return readResponse(t, c)
}

var (
	bashCall = map[string]any{"type": "function_call", "call_id": "call_1", "name": "Bash", "arguments": "{}"}
	bashOut  = map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "out"}
)

func developerMsg(text string) map[string]any {
	return map[string]any{"type": "message", "role": "developer",
		"content": []any{map[string]any{"type": "input_text", "text": text}}}
}

func assistantMsg(text string) map[string]any {
	return map[string]any{"type": "message", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text}}}
}

func TestToolCallAnswers(t *testing.T) {
	bash := `[sim:tool name=Bash args={"command":"ls"}]`
	tests := []struct {
		name      string
		opts      Options
		input     []any
		tools     []string
		wantCalls []string // names, in output order
		wantText  string   // substring of the text answer when no calls
	}{
		{name: "parallel", input: []any{userMsg(bash + `[sim:tool name=Read args={"path":"a"}]`)},
			tools: []string{"Bash", "Read"}, wantCalls: []string{"Bash", "Read"}},
		{name: "undeclared", input: []any{userMsg(bash)}, tools: []string{"Read"}, wantText: `tool "Bash" is not declared`},
		{name: "bad directive", input: []any{userMsg("[sim:tool args={}]")}, tools: []string{"Bash"}, wantText: "bad tool directive"},
		{name: "default call", opts: Options{ToolCalls: []ToolCall{{Name: "Bash"}}}, input: []any{userMsg("hi")},
			tools: []string{"Bash"}, wantCalls: []string{"Bash"}},
		{name: "directive only in an earlier user message", input: []any{userMsg(bash), userMsg("thanks")},
			tools: []string{"Bash"}, wantText: Answer(bash+"thanks", 3)},
		{name: "directive, then a developer message", input: []any{userMsg(bash), developerMsg("# Environment")},
			tools: []string{"Bash"}, wantCalls: []string{"Bash"}},
		{name: "results followed by a reminder are still answered", input: []any{userMsg(bash), bashCall, bashOut, userMsg("<reminder>")},
			tools: []string{"Bash"}, wantText: "Tool Bash returned: out"},
		{name: "answered results, then a new ask", input: []any{userMsg(bash), bashCall, bashOut, assistantMsg("Tool Bash returned: out"), userMsg(bash)},
			tools: []string{"Bash"}, wantCalls: []string{"Bash"}},
		{name: "answered results, default call again", opts: Options{ToolCalls: []ToolCall{{Name: "Bash"}}},
			input: []any{userMsg("go"), bashCall, bashOut, assistantMsg("done"), userMsg("again")}, tools: []string{"Bash"}, wantCalls: []string{"Bash"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Words = 3
			s := newServer(t, tt.opts)
			evs := readResponseOf(t, mustDial(t, s), toolFrame(tt.input, tt.tools, nil))
			var names []string
			ids := map[any]bool{}
			for i, c := range calls(t, evs) {
				names = append(names, c["name"].(string))
				ids[c["call_id"]] = true
				if evs[len(evs)-1].get("response.output."+string(rune('0'+i))+".call_id") != c["call_id"] {
					t.Errorf("call %d out of order in response.output", i)
				}
			}
			if got := s.Stats().ToolCalls; got != int64(len(tt.wantCalls)) {
				t.Errorf("Stats.ToolCalls %d, want %d", got, len(tt.wantCalls))
			}
			if !slices.Equal(names, tt.wantCalls) || len(ids) != len(names) {
				t.Errorf("calls %v (%d distinct call_ids), want %v", names, len(ids), tt.wantCalls)
			}
			if txt := textOf(evs); !strings.Contains(txt, tt.wantText) || (tt.wantText == "") != (txt == "") {
				t.Errorf("text %q, want it to contain %q", txt, tt.wantText)
			}
		})
	}
}

// TestToolOutputWithoutCallRefused: a function_call_output without its function_call is a 400
// naming the call_id, and the refusal draws no queued fault.
func TestToolOutputWithoutCallRefused(t *testing.T) {
	s := newServer(t, Options{})
	s.Faults.Next(AtResponse, 1, FaultFailed)
	c := mustDial(t, s)
	out := map[string]any{"type": "function_call_output", "call_id": "call_nope", "output": "x"}
	evs := readResponseOf(t, c, toolFrame([]any{userMsg("hi"), out}, nil, nil))
	if e := evs[0]; e.typ() != evError || e.get("status") != 400.0 || !strings.Contains(e.get("error.message").(string), "call_nope") {
		t.Errorf("got %s, want a 400 error naming the call_id", e.raw)
	}
	if evs := readResponseOf(t, c, createFrame("hi", nil)); evs[len(evs)-1].typ() != evFailed {
		t.Errorf("next response ends with %s, want the queued failure", evs[len(evs)-1].raw)
	}
}

func TestToolCallOverSSE(t *testing.T) {
	s := newServer(t, Options{})
	body := toolFrame([]any{userMsg(`[sim:tool name=Bash args={"command":"ls"}]`)}, []string{"Bash"}, nil)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	delete(m, "type")
	body, _ = json.Marshal(m)
	tr, evs := sseTrace(t, httpClient(t), s.HTTPURL, nil, body)
	if !slices.Contains(tr, evArgsDelta) || !slices.Contains(tr, evArgsDone) {
		t.Fatalf("SSE trace %v, want function call argument events", tr)
	}
	if got := calls(t, evs); len(got) != 1 || got[0]["name"] != "Bash" {
		t.Errorf("calls %v, want one Bash call", got)
	}
}

func TestReasoningEncryptedContent(t *testing.T) {
	s := newServer(t, Options{Words: 3})
	c := mustDial(t, s)
	include := map[string]any{"include": []string{includeEncrypted}}
	evs := readResponseOf(t, c, toolFrame([]any{userMsg("think")}, nil, include))
	want := []string{evCreated, evInProgress, evItemAdded, evSummaryPartAdded, evSummaryDelta}
	if got := types(evs)[:5]; !slices.Equal(got, want) {
		t.Fatalf("events start %v, want %v", got, want)
	}
	last := evs[len(evs)-1]
	rs, _ := last.get("response.output.0").(map[string]any)
	enc, _ := rs["encrypted_content"].(string)
	if rs["type"] != "reasoning" || !strings.HasPrefix(enc, encryptedPrefix) || last.get("response.output.0.summary.0.text") != reasoningSummary {
		t.Fatalf("output[0] %v, want a reasoning item with summary and encrypted_content", rs)
	}
	if last.get("response.output.1.type") != "message" || last.get("response.output.1.content.0.text") != Answer("think", 3) {
		t.Errorf("output[1] %v, want the Answer message", last.get("response.output.1"))
	}
	if last.get("response.usage.output_tokens_details.reasoning_tokens") != float64(reasoningTokens) ||
		last.get("response.usage.output_tokens") != float64(3+reasoningTokens) {
		t.Errorf("usage %v, want reasoning_tokens %d counted in output_tokens", last.get("response.usage"), reasoningTokens)
	}
	for _, tt := range []struct {
		name, enc string
		wantErr   bool
	}{{"issued", enc, false}, {"forged", "gAAAABforged", true}} {
		t.Run(tt.name, func(t *testing.T) {
			back := []any{userMsg("think"), rs, userMsg("again")}
			back[1] = map[string]any{"type": "reasoning", "id": rs["id"], "summary": []any{}, "encrypted_content": tt.enc}
			evs := readResponseOf(t, c, toolFrame(back, nil, include))
			if got := evs[len(evs)-1].typ() == evError; got != tt.wantErr {
				t.Errorf("sending back %s content: last event %s, want error %v", tt.name, evs[len(evs)-1].raw, tt.wantErr)
			}
		})
	}
}

func TestNoReasoningWithoutInclude(t *testing.T) {
	s := newServer(t, Options{Words: 3})
	evs := readResponseOf(t, mustDial(t, s), toolFrame([]any{userMsg("think")}, nil, nil))
	if slices.Contains(types(evs), evSummaryDelta) || evs[len(evs)-1].get("response.usage.output_tokens_details.reasoning_tokens") != 0.0 {
		t.Errorf("reasoning without include: %v", types(evs))
	}
}

func TestListenChecksToolCalls(t *testing.T) {
	for _, tc := range []ToolCall{{Name: ""}, {Name: "Bash", Arguments: "[1]"}} {
		if s, err := Listen("", Options{ToolCalls: []ToolCall{tc}}); err == nil || !strings.Contains(err.Error(), "ToolCalls[0]") {
			if s != nil {
				s.Close()
			}
			t.Errorf("Listen with ToolCalls %+v: %v, want an error naming ToolCalls[0]", tc, err)
		}
	}
}
