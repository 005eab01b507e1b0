package chat

import (
	"errors"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/gateway/wire"
)

func TestTranslate(t *testing.T) {
	long := strings.Repeat("c", 70)
	tests := []struct {
		name string
		body string
		want string // the pool body
	}{
		{"user text",
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"stream":true}`},
		{"system and developer to instructions",
			`{"messages":[{"role":"system","content":"Be brief."},{"role":"developer","content":[{"type":"text","text":"Use Go."}]},{"role":"user","content":"hi"}]}`,
			`{"instructions":"Be brief.\n\nUse Go.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"stream":true}`},
		{"user parts with an image and a file",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA==","detail":"low"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,AA==","filename":"a.pdf"}}]}]}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"see"},{"type":"input_image","image_url":"data:image/png;base64,AA==","detail":"low"},{"type":"input_file","file_data":"data:application/pdf;base64,AA==","filename":"a.pdf"}]}],"stream":true}`},
		{"tool round trip",
			`{"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"get_time","arguments":""}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"noon"}]},{"role":"assistant","content":"Sunny at noon."}]}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"weather?"}]},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call","call_id":"call_2","name":"get_time","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"sunny"},{"type":"function_call_output","call_id":"call_2","output":"noon"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Sunny at noon."}]}],"stream":true}`},
		{"long call id shortened on both sides",
			`{"messages":[{"role":"assistant","tool_calls":[{"id":"` + long + `","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"` + long + `","content":"ok"}]}`,
			`{"instructions":"","input":[{"type":"function_call","call_id":"ccccccccccccccccccccccccccccccccccccccccccccccc_6fe5981a314622bb","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"ccccccccccccccccccccccccccccccccccccccccccccccc_6fe5981a314622bb","output":"ok"}],"stream":true}`},
		{"tools, tool_choice and parallel_tool_calls",
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"string"}}},"strict":true}},{"type":"function","function":{"name":"g"}},{"type":"function","function":{"name":"h","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"string"}}},"strict":true},{"type":"function","name":"g","parameters":{"type":"object","properties":{}},"strict":false},{"type":"function","name":"h","parameters":{"properties":{},"type":"object"},"strict":false}],"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false,"stream":true}`},
		{"long mcp tool names shortened, collisions numbered",
			`{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"` + longTool + `","arguments":"{}"}}]}],"tools":[{"type":"function","function":{"name":"` + longTool + `"}},{"type":"function","function":{"name":"mcp__another_server_whose_name_is_also_much_too_long_for_codex__read_file"}}],"tool_choice":"required"}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call","call_id":"c","name":"mcp__read_file","arguments":"{}"}],"tools":[{"type":"function","name":"mcp__read_file","parameters":{"type":"object","properties":{}},"strict":false},{"type":"function","name":"mcp__read_file_1","parameters":{"type":"object","properties":{}},"strict":false}],"tool_choice":"required","stream":true}`},
		{"refused fields dropped, the rest mapped",
			`{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":0.2,"top_p":1,"max_tokens":10,"max_completion_tokens":10,"metadata":{"a":"b"},"user":"u","n":1,"stop":null,"stream":true,"stream_options":{"include_usage":true},"reasoning_effort":"high","verbosity":"low","prompt_cache_key":"k","response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"},"strict":true}}}`,
			`{"model":"m","instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"reasoning":{"effort":"high"},"text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"},"strict":true},"verbosity":"low"},"prompt_cache_key":"k","stream":true}`},
		{"empty assistant text beside tool calls dropped",
			`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}],"stream":true}`},
		{"allowed_tools choice",
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"f"}}]}}}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{}},"strict":false}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"f"}]},"stream":true}`},
		// The rules every dialect shares (gateway/wire), each of which this translator once broke.
		{"a shortened name never takes one that fits (collision rule)",
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"` + longTool + `"}},{"type":"function","function":{"name":"mcp__read_file"}}]}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"tools":[{"type":"function","name":"mcp__read_file_1","parameters":{"type":"object","properties":{}},"strict":false},{"type":"function","name":"mcp__read_file","parameters":{"type":"object","properties":{}},"strict":false}],"stream":true}`},
		{"$schema removed from tool parameters",
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"string"}}}}}]}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"tools":[{"type":"function","name":"f","parameters":{"properties":{"a":{"type":"string"}},"type":"object"},"strict":false}],"stream":true}`},
		{"an unknown content type stands as a note",
			`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}},{"type":"text","text":"x"}]}]}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"[unsupported content block omitted: input_audio]"},{"type":"input_text","text":"x"}]}],"stream":true}`},
		{"no stop sequence is fine, tool_choice none and auto as they are",
			`{"stop":[],"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none","parallel_tool_calls":true}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{}},"strict":false}],"tool_choice":"none","parallel_tool_calls":true,"stream":true}`},
		{"empty stop string is fine",
			`{"stop":"","messages":[{"role":"user","content":"x"}],"tool_choice":"auto"}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"tool_choice":"auto","stream":true}`},
		{"json_object format",
			`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`,
			`{"instructions":"","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"text":{"format":{"type":"json_object"}},"stream":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := Translate([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(req.Body); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestTranslateStreamFlags(t *testing.T) {
	req, err := Translate([]byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !req.Stream || !req.IncludeUsage || req.Model != "m" {
		t.Errorf("got stream %v include_usage %v model %q, want true true m", req.Stream, req.IncludeUsage, req.Model)
	}
}

func TestTranslateRefuses(t *testing.T) {
	tests := []struct {
		name, body, param string
	}{
		{"not JSON", `{`, ""},
		{"no messages", `{"model":"m"}`, "messages"},
		{"only system", `{"messages":[{"role":"system","content":"x"}]}`, "messages"},
		{"several choices", `{"n":2,"messages":[{"role":"user","content":"x"}]}`, "n"},
		{"a stop sequence", `{"stop":"END","messages":[{"role":"user","content":"x"}]}`, "stop"},
		{"stop sequences", `{"stop":["a","b"],"messages":[{"role":"user","content":"x"}]}`, "stop"},
		{"unknown role", `{"messages":[{"role":"user","content":"x"},{"role":"function","content":"x"}]}`, "messages[1].role"},
		{"tool without call id", `{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{"content not string or parts", `{"messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{"image in a system message", `{"messages":[{"role":"system","content":[{"type":"image_url"}]},{"role":"user","content":"x"}]}`, "messages[0].content[0].type"},
		{"tool call without a name", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{}}]}]}`, "messages[0].tool_calls[0]"},
		{"custom tool", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom"}]}`, "tools[0].type"},
		{"unnamed function tool", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name"},
		{"unknown tool_choice", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"any"}`, "tool_choice"},
		{"tool_choice object without a name", `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function"}}`, "tool_choice"},
		{"allowed_tools without tools", `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`, "tool_choice.allowed_tools"},
		{"allowed_tools with an unnamed tool", `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function"}]}}}`, "tool_choice.allowed_tools.tools[0]"},
		{"unknown response_format", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}`, "response_format.type"},
		{"json_schema without a name", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{}}}`, "response_format.json_schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Translate([]byte(tt.body))
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want a *RequestError", err)
			}
			if re.Param != tt.param || re.Message == "" {
				t.Errorf("got param %q message %q, want param %q and a message", re.Param, re.Message, tt.param)
			}
		})
	}
}

func TestShortID(t *testing.T) {
	tests := []struct{ name, id, want string }{
		{"short kept", "call_1", "call_1"},
		{"64 kept", strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{"65 hashed", strings.Repeat("a", 65), strings.Repeat("a", 47) + "_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := wire.ShortID(tt.id)
			if !strings.HasPrefix(got, tt.want) || len(got) > wire.MaxIDLen || (len(tt.id) <= 64 && got != tt.id) {
				t.Errorf("got %q, want %q…, at most 64", got, tt.want)
			}
		})
	}
}
