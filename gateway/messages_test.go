package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

const helloMessage = `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"Be brief.","messages":[{"role":"user","content":"Say hello"}]}`

// anthropicError decodes an error body in Anthropic's shape, failing on any other shape.
func anthropicError(t *testing.T, body []byte) (typ, msg string) {
	t.Helper()
	var b struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.Type != "error" || b.Error == nil || b.Error.Type == "" || b.Error.Message == "" {
		t.Fatalf("body %s is not {\"type\":\"error\",\"error\":{\"type\",\"message\"}}", body)
	}
	return b.Error.Type, b.Error.Message
}

// TestMessagesText: a non-streamed message through the pool, with the key as x-api-key (and no
// Authorization), comes back as one Anthropic message with the simulator's words.
func TestMessagesText(t *testing.T) {
	p := newPool(t, poolOptions{})
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodPost, p.srv.URL+"/v1/messages", strings.NewReader(helloMessage))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp := do(t, req)
	body := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %s, want 200", resp.StatusCode, body)
	}
	var m struct {
		Type       string `json:"type"`
		Role       string `json:"role"`
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct{ Type, Text string }
		Usage      struct {
			OutputTokens int `json:"output_tokens"`
		}
	}
	if json.Unmarshal(body, &m) != nil {
		t.Fatalf("got %s, not a message", body)
	}
	if m.Type != "message" || m.Role != "assistant" || m.Model != "claude-sonnet-4-5" || m.StopReason != "end_turn" {
		t.Errorf("got %s, want an assistant message for claude-sonnet-4-5 ending end_turn", body)
	}
	// The simulator adds a reasoning item (the request includes its encrypted content): a
	// thinking block first, then the text.
	if len(m.Content) != 2 || m.Content[0].Type != "thinking" || m.Content[1].Type != "text" || len(strings.Fields(strings.TrimPrefix(m.Content[1].Text, codextest.AnswerPrefix))) != words {
		t.Errorf("got content %+v, want a thinking block and one text block of %d words", m.Content, words)
	}
	if m.Usage.OutputTokens <= 0 {
		t.Errorf("got output_tokens %d, want > 0", m.Usage.OutputTokens)
	}
}

// TestMessagesStream: a streamed message comes as Anthropic SSE frames in order, with the key as
// Bearer, and message_delta carries the stop_reason (Claude Code acts on it).
func TestMessagesStream(t *testing.T) {
	p := newPool(t, poolOptions{})
	body := strings.Replace(helloMessage, `{"model"`, `{"stream":true,"model"`, 1)
	resp := post(t, p, "/v1/messages", body, map[string]string{"Anthropic-Version": "2023-06-01"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %s, want 200", resp.StatusCode, readAll(t, resp.Body))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("got Content-Type %q, want text/event-stream", ct)
	}
	var names []string
	var text strings.Builder
	stop := ""
	sc := bufio.NewScanner(resp.Body)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if ev, found := strings.CutPrefix(line, "event: "); found {
			event = ev
			continue
		}
		data, found := strings.CutPrefix(line, "data: ")
		if !found {
			continue
		}
		names = append(names, event)
		var d struct {
			Type  string `json:"type"`
			Delta struct {
				Text       string `json:"text"`
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil || d.Type != event {
			t.Fatalf("frame %q: data type %q, want %q", data, d.Type, event)
		}
		text.WriteString(d.Delta.Text)
		if event == "message_delta" {
			stop = d.Delta.StopReason
		}
	}
	got := strings.Join(dedupe(names), ",")
	// A thinking block (the simulator's reasoning item), then the text block.
	block := "content_block_start,content_block_delta,content_block_stop,"
	want := "message_start," + block + block + "message_delta,message_stop"
	if got != want {
		t.Errorf("got frames %s, want %s", got, want)
	}
	if stop != "end_turn" {
		t.Errorf("got stop_reason %q in message_delta, want end_turn", stop)
	}
	if n := len(strings.Fields(strings.TrimPrefix(text.String(), codextest.AnswerPrefix))); n != words {
		t.Errorf("got %d words %q, want %d", n, text.String(), words)
	}
}

// dedupe collapses runs of one name (the deltas).
func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// TestCountTokens: count_tokens answers {"input_tokens": N > 0} without a generation.
func TestCountTokens(t *testing.T) {
	p := newPool(t, poolOptions{})
	resp := post(t, p, "/v1/messages/count_tokens", helloMessage, nil)
	body := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %s, want 200", resp.StatusCode, body)
	}
	var c struct {
		InputTokens *int `json:"input_tokens"`
	}
	if json.Unmarshal(body, &c) != nil || c.InputTokens == nil || *c.InputTokens <= 0 {
		t.Errorf("got %s, want {\"input_tokens\": N > 0}", body)
	}
	if n := p.sim.Stats().Responses; n != 0 {
		t.Errorf("got %d generations at the origin, want 0", n)
	}
	if n := p.svc.Stats().Requests; n != 0 {
		t.Errorf("got %d pool requests, want 0", n)
	}
}

func TestMessagesErrorShapes(t *testing.T) {
	p := newPool(t, poolOptions{})
	cases := []struct {
		name     string
		path     string
		body     string
		hdr      map[string]string
		noAuth   bool
		status   int
		typ      string
		wantText string
	}{
		{name: "no key", path: "/v1/messages", body: helloMessage, noAuth: true, status: 401, typ: "authentication_error", wantText: "x-api-key"},
		{name: "wrong x-api-key", path: "/v1/messages", body: helloMessage, noAuth: true, hdr: map[string]string{"X-Api-Key": "nope"}, status: 401, typ: "authentication_error", wantText: "key"},
		{name: "no messages", path: "/v1/messages", body: `{"model":"claude-x","messages":[]}`, status: 400, typ: "invalid_request_error", wantText: "messages"},
		{name: "not JSON", path: "/v1/messages", body: `{"messages":`, status: 400, typ: "invalid_request_error", wantText: "valid"},
		{name: "count_tokens not JSON", path: "/v1/messages/count_tokens", body: `[`, status: 400, typ: "invalid_request_error", wantText: "valid"},
		{name: "no route", path: "/v1/messages/batches", body: `{}`, status: 404, typ: "not_found_error", wantText: "no route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodPost, p.srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.noAuth {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resp := do(t, req)
			body := readAll(t, resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("got status %d (%s), want %d", resp.StatusCode, body, tc.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", ct)
			}
			typ, msg := anthropicError(t, body)
			if typ != tc.typ || !strings.Contains(msg, tc.wantText) {
				t.Errorf("got %s %q, want %s mentioning %q", typ, msg, tc.typ, tc.wantText)
			}
		})
	}
	if n := p.sim.Stats().Responses; n != 0 {
		t.Errorf("got %d generations at the origin, want 0", n)
	}
}

// TestMessagesOriginOutcomes: what the origin does comes back in Anthropic's terms: an
// incomplete answer is stop_reason max_tokens (not an error), a usage limit a 429
// rate_limit_error with retry-after, a failure before any content a status even when streamed.
func TestMessagesOriginOutcomes(t *testing.T) {
	p := newPool(t, poolOptions{})
	streamed := strings.Replace(helloMessage, `{"model"`, `{"stream":true,"model"`, 1)
	cases := []struct {
		name       string
		fault      codextest.Fault
		body       string
		status     int
		want       []string // substrings of the body
		retryAfter bool
	}{
		{name: "incomplete", fault: codextest.FaultIncomplete, body: helloMessage, status: 200, want: []string{`"stop_reason":"max_tokens"`}},
		{name: "incomplete streamed", fault: codextest.FaultIncomplete, body: streamed, status: 200,
			want: []string{"event: message_delta", `"stop_reason":"max_tokens"`, "event: message_stop"}},
		{name: "usage limit", fault: "error:429", body: helloMessage, status: 429, want: []string{`"type":"rate_limit_error"`}, retryAfter: true},
		{name: "failed right after created, streamed", fault: codextest.FaultFailed, body: streamed, status: 502, want: []string{`{"type":"error","error":{"type":"api_error"`}},
		{name: "failed", fault: codextest.FaultFailed, body: helloMessage, status: 502, want: []string{`{"type":"error","error":{"type":"api_error"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p.sim.Faults.Clear()
			p.sim.Faults.Next(codextest.AtResponse, 1, tc.fault)
			resp := post(t, p, "/v1/messages", tc.body, nil)
			body := string(readAll(t, resp.Body))
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("got %s, want it to contain %s", body, w)
				}
			}
			if ra := resp.Header.Get("Retry-After"); tc.retryAfter && ra == "" {
				t.Error("got no retry-after")
			}
		})
	}
}

// TestMessagesToolHistory: a conversation with a tool round trip, tools, tool_choice, thinking,
// a signed thinking block and the fields the backend refuses is accepted by the pool as
// translated (the simulator answers it).
func TestMessagesToolHistory(t *testing.T) {
	p := newPool(t, poolOptions{})
	body := `{"model":"claude-opus-4-1","max_tokens":32000,"temperature":1,"top_p":0.9,"top_k":5,
		"metadata":{"user_id":"user_1_account__session_abc"},"thinking":{"type":"enabled","budget_tokens":4000},
		"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2"},{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],
		"tools":[{"name":"Bash","description":"Run a command","input_schema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}],
		"tool_choice":{"type":"auto"},
		"messages":[{"role":"user","content":"list the files"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"I should run ls.","signature":"EqQBforeign"},{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"ls"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"a.go\nb.go"}]}]}`
	resp := post(t, p, "/v1/messages", body, map[string]string{"X-Claude-Code-Session-Id": "abc"})
	got := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"stop_reason":"end_turn"`) {
		t.Fatalf("got %d %s, want 200 and a message", resp.StatusCode, got)
	}
}

// replayRecorded is a generator that streams the recorded events of gateway/anthropic/testdata/name
// (except origin error events) and then ends with fail, or with the recording's last response.
func replayRecorded(t *testing.T, name string, fail *schemas.Error) genFunc {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("anthropic", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	return func(_ context.Context, _ *schemas.Request, emit func([]byte) error) ([]byte, error) {
		if emit == nil {
			return nil, &schemas.Error{Status: 400, Code: schemas.CodeInvalidRequest, Message: "replay streams only"}
		}
		for _, l := range lines {
			if strings.HasPrefix(l, `{"type":"error"`) {
				break
			}
			if err := emit([]byte(l)); err != nil {
				return nil, err
			}
		}
		if fail != nil {
			return nil, fail
		}
		return []byte(`{"id":"r","status":"completed","output":[]}`), nil
	}
}

// TestMessagesReplayed: recorded origin streams through the real pool and gateway: parallel
// tool calls reach the client as tool_use blocks with stop_reason tool_use (streamed and not),
// and an origin overload after content is one event: error frame of type overloaded_error.
func TestMessagesReplayed(t *testing.T) {
	streamed := strings.Replace(helloMessage, `{"model"`, `{"stream":true,"model"`, 1)
	overload := &schemas.Error{Status: 502, Code: schemas.CodeUpstreamError, UpstreamCode: "server_is_overloaded",
		Message: "codex: origin error: Our servers are currently overloaded."}
	cases := []struct {
		name, file, body string
		fail             *schemas.Error
		status           int
		want             []string
	}{
		{name: "tools streamed", file: "parallel_tools.jsonl", body: streamed, status: 200, want: []string{
			`"content_block":{"id":"call_a","input":{},"name":"Read","type":"tool_use"}`, `"partial_json":"{\"path\":\"b.go\"}"`,
			`"stop_reason":"tool_use"`, "event: message_stop"}},
		{name: "tools", file: "parallel_tools.jsonl", body: helloMessage, status: 200, want: []string{
			`{"id":"call_a","input":{"file_path":"a.go"},"name":"Read","type":"tool_use"}`, `"stop_reason":"tool_use"`}},
		{name: "overload mid-stream", file: "error_midstream.jsonl", body: streamed, fail: overload, status: 200, want: []string{
			`"text":"Partial"`, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\""}},
		{name: "overload before content", file: "error_midstream.jsonl", body: helloMessage, fail: overload, status: 529, want: []string{
			`{"type":"error","error":{"type":"overloaded_error"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, poolOptions{gen: replayRecorded(t, tc.file, tc.fail)})
			resp := post(t, p, "/v1/messages", tc.body, nil)
			body := string(readAll(t, resp.Body))
			if resp.StatusCode != tc.status {
				t.Errorf("got status %d, want %d", resp.StatusCode, tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("got %d %s, want it to contain %s", resp.StatusCode, body, w)
				}
			}
		})
	}
}

// TestMessagesToolRoundTrip: the simulator asks for the client's Bash tool; the streamed answer
// is a tool_use block with stop_reason tool_use in message_delta; the client's tool_result (with
// the signed thinking block of the first answer) goes back, and the answer quotes the output.
func TestMessagesToolRoundTrip(t *testing.T) {
	p := newPool(t, poolOptions{})
	tools := `"tools":[{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}]`
	ask := `{"role":"user","content":"Write the file. [sim:tool name=Bash args={\"command\":\"echo hi > f.txt\"}]"}`
	resp := post(t, p, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,`+tools+`,"messages":[`+ask+`]}`, nil)
	sse := string(readAll(t, resp.Body))
	for _, w := range []string{`"name":"Bash","type":"tool_use"`, `"stop_reason":"tool_use"`, "event: message_stop"} {
		if !strings.Contains(sse, w) {
			t.Fatalf("got %d %s, want it to contain %s", resp.StatusCode, sse, w)
		}
	}
	var call struct{ id, args, sig string }
	for line := range strings.SplitSeq(sse, "\n") {
		data, _ := strings.CutPrefix(line, "data: ")
		var f struct {
			ContentBlock struct{ Type, ID string } `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				PartialJSON string `json:"partial_json"`
				Signature   string `json:"signature"`
			} `json:"delta"`
		}
		if json.Unmarshal([]byte(data), &f) != nil {
			continue
		}
		if f.ContentBlock.Type == "tool_use" {
			call.id = f.ContentBlock.ID
		}
		call.args += f.Delta.PartialJSON
		if f.Delta.Type == "signature_delta" {
			call.sig = f.Delta.Signature
		}
	}
	if call.id == "" || !strings.Contains(call.args, "echo hi") || call.sig == "" {
		t.Fatalf("got call %+v, want an id, the command and a thinking signature", call)
	}
	turn2 := `{"model":"claude-sonnet-4-5","max_tokens":1024,` + tools + `,"messages":[` + ask +
		`,{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"` + call.sig + `"},{"type":"tool_use","id":"` + call.id + `","name":"Bash","input":` + call.args + `}]}` +
		`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + call.id + `","content":"hi"}]}]}`
	resp = post(t, p, "/v1/messages", turn2, nil)
	body := string(readAll(t, resp.Body))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Tool Bash returned: hi") || !strings.Contains(body, `"stop_reason":"end_turn"`) {
		t.Fatalf("got %d %s, want the answer quoting the tool's output", resp.StatusCode, body)
	}
}
