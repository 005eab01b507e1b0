package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/gateway/wire"
)

func TestTranslate(t *testing.T) {
	longID := strings.Repeat("toolu_", 12)
	cases := []struct {
		name string
		body string
		opts Options
		// want are JSON fragments the translated body must contain; absent ones it must not.
		want, absent []string
	}{
		{name: "text and system", body: `{"model":"claude-sonnet-4-5","max_tokens":100,"temperature":0.2,"top_p":0.9,"metadata":{"user_id":"u"},"system":[{"type":"text","text":"x-anthropic-billing-header: cc"},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`,
			want:   []string{`"instructions":"Be brief."`, `"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]`, `"include":["reasoning.encrypted_content"]`, `"parallel_tool_calls":true`},
			absent: []string{`"model"`, "temperature", "top_p", "max_tokens", "max_output_tokens", "metadata", "cache_control", "billing", "prompt_cache_key"}},
		{name: "served model kept", body: `{"model":"gpt-5.1-codex","messages":[{"role":"user","content":"hi"}]}`, opts: Options{Served: []string{"gpt-5.1-codex"}},
			want: []string{`"model":"gpt-5.1-codex"`}},
		{name: "model map", body: `{"model":"claude-opus-4-1[1m]","messages":[{"role":"user","content":"hi"}]}`, opts: Options{Models: ModelMap{{"claude-*opus*", "gpt-5.1-codex-max"}}},
			want: []string{`"model":"gpt-5.1-codex-max"`}},
		{name: "tool loop", body: `{"messages":[{"role":"user","content":"list"},{"role":"assistant","content":[{"type":"text","text":"Running."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a.go"}]},{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":"boom"},{"type":"text","text":"go on"}]}],"tools":[{"name":"Bash","description":"Run","input_schema":{"$schema":"x","properties":{"command":{"type":"string"}}}}]}`,
			want: []string{`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Running."}]},{"type":"function_call","call_id":"toolu_1","name":"Bash","arguments":"{\"command\":\"ls\"}"},{"type":"function_call_output","call_id":"toolu_1","output":"a.go"},{"type":"function_call_output","call_id":"toolu_2","output":"[tool execution error] boom"},{"type":"message","role":"user","content":[{"type":"input_text","text":"go on"}]`,
				`"tools":[{"type":"function","name":"Bash","description":"Run","parameters":{"properties":{"command":{"type":"string"}},"type":"object"},"strict":false}]`},
			absent: []string{"$schema"}},
		// The rules every dialect shares (gateway/wire), each of which this translator once broke.
		{name: "tool schema kept as sent, not through float64", body: `{"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740993}}}}]}`,
			want: []string{`"parameters":{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740993}}}`}},
		{name: "unknown block stands as a note", body: `{"messages":[{"role":"user","content":[{"type":"container_upload","file_id":"file_1"},{"type":"text","text":"x"}]}]}`,
			want: []string{`"content":[{"type":"input_text","text":"[unsupported content block omitted: container_upload]"},{"type":"input_text","text":"x"}]`}},
		{name: "output_format (structured outputs beta)", body: `{"messages":[{"role":"user","content":"x"}],"output_format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}`,
			want: []string{`"text":{"format":{"name":"output","schema":{"additionalProperties":false,"properties":{"a":{"type":"string"}},"required":["a"],"type":"object"},"strict":true,"type":"json_schema"}}`}},
		{name: "no stop sequences is fine", body: `{"messages":[{"role":"user","content":"x"}],"stop_sequences":[]}`, want: []string{`"input":`}},
		{name: "tool_choice auto keeps parallel calls", body: `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"auto"}}`, want: []string{`"tool_choice":"auto","parallel_tool_calls":true`}},
		{name: "base64 image with text", body: `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}},{"type":"text","text":"what?"}]}]}`,
			want: []string{`"content":[{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/"},{"type":"input_text","text":"what?"}]`}},
		{name: "long call id", body: `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"` + longID + `","name":"X","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + longID + `","content":"ok"}]}]}`,
			want: []string{`"call_id":"` + wire.ShortID(longID) + `","name":"X"`, `"call_id":"` + wire.ShortID(longID) + `","output":"ok"`}},
		{name: "long tool name", body: `{"messages":[{"role":"user","content":"x"}],"tools":[{"name":"` + longMCP + `","input_schema":null}],"tool_choice":{"type":"tool","name":"` + longMCP + `"}}`,
			want: []string{`"name":"mcp__read_file","parameters":{"type":"object","properties":{}}`, `"tool_choice":{"type":"function","name":"mcp__read_file"}`}},
		{name: "tool_choice any, no parallel", body: `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
			want: []string{`"tool_choice":"required"`, `"parallel_tool_calls":false`}},
		{name: "tool_choice none", body: `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"none"}}`, want: []string{`"tool_choice":"none"`}},
		{name: "thinking budget", body: `{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":10000}}`,
			want: []string{`"reasoning":{"effort":"high","summary":"auto"}`}},
		{name: "thinking adaptive", body: `{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"adaptive"}}`, want: []string{`"effort":"xhigh"`}},
		{name: "thinking disabled", body: `{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"disabled"}}`, want: []string{`"reasoning":{"effort":"none"}`}},
		{name: "signature round trip", body: `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"` + encodeSignature("rs_1", "gAAAAenc") + `"},{"type":"thinking","thinking":"t","signature":"EqQBCkYIAxgCIkD-anthropic"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"42"}]}]}`,
			want:   []string{`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAAenc"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"42"}]`},
			absent: []string{"anthropic", "redacted"}},
		{name: "system message mid-conversation", body: `{"messages":[{"role":"user","content":"x"},{"role":"system","content":"reminder"}]}`,
			want: []string{`"role":"developer"`}, absent: []string{`"role":"system"`}},
		{name: "image", body: `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAA"}}]}]}`,
			want: []string{`{"type":"input_image","image_url":"data:image/png;base64,AAA"}`}},
		{name: "session cache key", body: `{"messages":[{"role":"user","content":"x"}]}`, opts: Options{SessionID: "s1"},
			want: []string{`"prompt_cache_key":"` + cacheKey(Options{SessionID: "s1"}, "") + `"`}},
		{name: "session from metadata", body: `{"metadata":{"user_id":"user_abc_account__session_s1"},"messages":[{"role":"user","content":"x"}]}`,
			want: []string{`"prompt_cache_key":"` + cacheKey(Options{SessionID: "s1"}, "") + `"`}},
		{name: "structured output", body: `{"messages":[{"role":"user","content":"x"}],"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"string"}}},"a":{"type":"string"}}}}}}`,
			want: []string{`"text":{"format":{"name":"output","schema":{"additionalProperties":false,"properties":{"a":{"type":"string"},"b":{"additionalProperties":false,"properties":{"c":{"type":"string"}},"required":["c"],"type":"object"}},"required":["a","b"],"type":"object"},"strict":true,"type":"json_schema"}}`}},
		{name: "compaction capped at low", body: `{"messages":[{"role":"user","content":"Summarize. CRITICAL: Respond with TEXT ONLY."}],"thinking":{"type":"adaptive"}}`,
			want: []string{`"reasoning":{"effort":"low","summary":"auto"}`}},
		{name: "fast", body: `{"speed":"fast","messages":[{"role":"user","content":"x"}]}`, want: []string{`"service_tier":"priority"`}},
		{name: "stream", body: `{"stream":true,"messages":[{"role":"user","content":"x"}]}`, want: []string{`"stream":true`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Translate([]byte(tc.body), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got := string(tr.Body)
			if !json.Valid(tr.Body) {
				t.Fatalf("got invalid JSON %s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %s, want it to contain %s", got, w)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(got, a) {
					t.Errorf("got %s, want no %s", got, a)
				}
			}
		})
	}
}

func TestTranslateRefuses(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"not JSON", `{"messages":`, "not a valid"},
		{"no messages", `{"model":"x","messages":[]}`, "messages"},
		{"bad role", `{"messages":[{"role":"tool","content":"x"}]}`, "role"},
		{"bad content", `{"messages":[{"role":"user","content":7}]}`, "content"},
		{"only empty text", `{"messages":[{"role":"user","content":""}]}`, "no content"},
		{"stop sequences", `{"messages":[{"role":"user","content":"x"}],"stop_sequences":["END"]}`, "stop_sequences"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Translate([]byte(tc.body), Options{})
			e, ok := err.(*Error)
			if !ok || e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("got %v, want a 400 invalid_request_error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestParseModelMap(t *testing.T) {
	m, err := ParseModelMap(" claude-*haiku*=gpt-5.1-codex-mini, claude-*=gpt-5.1-codex ")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, in, want string }{
		{"first match", "claude-haiku-4-5", "gpt-5.1-codex-mini"},
		{"catch-all", "claude-sonnet-4-5", "gpt-5.1-codex"},
		{"served", "gpt-5.2", "gpt-5.2"},
		{"unknown", "llama", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.Resolve(tc.in, []string{"gpt-5.2"}); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := ParseModelMap("nope"); err == nil {
		t.Error("got no error for a rule without =")
	}
}

func TestFromStatus(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		code, msg  string
		wantStatus int
		wantType   string
	}{
		{"bad request", 400, "", "x", 400, "invalid_request_error"},
		{"auth", 401, "", "x", 401, "authentication_error"},
		{"not found", 404, "", "x", 404, "not_found_error"},
		{"context overflow", 400, "context_length_exceeded", "Your input exceeds the context window", 413, "request_too_large"},
		{"context overflow by message", 502, "", "Your input exceeds the context window of this model", 413, "request_too_large"},
		{"rate limit", 429, "usage_limit_reached", "x", 429, "rate_limit_error"},
		{"overloaded", 502, "server_is_overloaded", "x", 529, "overloaded_error"},
		{"unavailable", 503, "", "x", 529, "overloaded_error"},
		{"timeout", 504, "", "x", 504, "timeout_error"},
		{"other 5xx", 502, "", "x", 502, "api_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := FromStatus(tc.status, tc.code, tc.msg, 0)
			if e.Status != tc.wantStatus || e.Type != tc.wantType {
				t.Errorf("got %d %s, want %d %s", e.Status, e.Type, tc.wantStatus, tc.wantType)
			}
			var b struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if json.Unmarshal(e.Body(), &b) != nil || b.Type != "error" || b.Error.Type != tc.wantType || b.Error.Message != tc.msg {
				t.Errorf("got body %s", e.Body())
			}
		})
	}
}

func TestMessage(t *testing.T) {
	resp := `{"id":"resp_1","status":"completed","output":[{"type":"reasoning","id":"rs_1","summary":[{"text":"a"},{"text":"b"}],"encrypted_content":"gAAAAx"},{"type":"message","content":[{"type":"output_text","text":"Hi"}]},{"type":"function_call","call_id":"call_1","name":"mcp__read_file","arguments":"{\"p\":1}"},{"type":"function_call","call_id":"call_2","name":"Bad","arguments":"not json"}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":3}}`
	b, err := Message([]byte(resp), "claude-x", wire.NewNames([]string{longMCP}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"content":[{"signature":"` + encodeSignature("rs_1", "gAAAAx") + `","thinking":"a\n\nb","type":"thinking"},{"text":"Hi","type":"text"},{"id":"call_1","input":{"p":1},"name":"` + longMCP + `","type":"tool_use"},{"id":"call_2","input":{},"name":"Bad","type":"tool_use"}],"id":"resp_1","model":"claude-x","role":"assistant","stop_reason":"tool_use","stop_sequence":null,"type":"message","usage":{"input_tokens":6,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":3}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	inc, _ := Message([]byte(`{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`), "m", wire.Names{})
	if !strings.Contains(string(inc), `"stop_reason":"max_tokens"`) {
		t.Errorf("got %s, want stop_reason max_tokens", inc)
	}
}

func TestCountTokens(t *testing.T) {
	tr, err := Translate([]byte(`{"system":"You are terse.","messages":[{"role":"user","content":"Say hello to the world"}],"tools":[{"name":"Bash","input_schema":{"type":"object"}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := CountTokens(tr.Body)
	if err != nil {
		t.Fatal(err)
	}
	// "You are terse." is 4 tokens and "Say hello to the world" 5 in o200k; the tools add more.
	if n < 4+5+perItem+5 || n > 60 {
		t.Errorf("got %d tokens, want between 18 and 60", n)
	}
	more, _ := Translate([]byte(`{"messages":[{"role":"user","content":"`+strings.Repeat("word ", 1000)+`"}]}`), Options{})
	if m, _ := CountTokens(more.Body); m < 1000 {
		t.Errorf("got %d tokens for 1000 words, want at least 1000", m)
	}
}
