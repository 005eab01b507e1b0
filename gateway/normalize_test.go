package gateway

import "testing"

func TestNormalize(t *testing.T) {
	cases := []struct {
		name, in, want     string
		stream, background bool
	}{
		{"untouched", `{"input":"hi", "model" : "m"}`, `{"input":"hi", "model" : "m"}`, false, false},
		{"stream", `{"input":"hi","stream":true}`, `{"input":"hi","stream":true}`, true, false},
		{"stream false", `{"input":"hi","stream":false}`, `{"input":"hi","stream":false}`, false, false},
		{"nulls", `{"instructions":null,"input":"hi","text":{"a":null},"max_output_tokens":null}`, `{"input":"hi","text":{"a":null}}`, false, false},
		{"background false", `{"input":"hi","background":false}`, `{"input":"hi"}`, false, false},
		{"background true", `{"background":true,"input":"hi"}`, `{"input":"hi"}`, false, true},
		{"last key wins", `{"stream":true,"input":"hi","stream":false}`, `{"stream":true,"input":"hi","stream":false}`, false, false},
		{"escaped key", `{"input":"hi","str\u0065am":true}`, `{"input":"hi","str\u0065am":true}`, true, false},
		{"not an object", `["input"]`, `["input"]`, false, false},
		{"not JSON", `{"input":"hi","stream":true`, `{"input":"hi","stream":true`, false, false},
		{"empty object", `{}`, `{}`, false, false},
		{"all null", ` { "a" : null } `, `{}`, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := normalize([]byte(tc.in))
			if string(r.body) != tc.want || r.stream != tc.stream || r.background != tc.background {
				t.Errorf("got %s stream %v background %v, want %s %v %v", r.body, r.stream, r.background, tc.want, tc.stream, tc.background)
			}
		})
	}
}

func TestInspectEvent(t *testing.T) {
	cases := []struct {
		name, in, typ, out string
		isError            bool
	}{
		{"delta", `{"type":"response.output_text.delta","delta":"hi"}`, "response.output_text.delta", `{"type":"response.output_text.delta","delta":"hi"}`, false},
		{"nested error kept", `{"type":"response.created","response":{"error":null}}`, "response.created", `{"type":"response.created","response":{"error":null}}`, false},
		{"null error removed", `{"type":"x","error":null,"a":1}`, "x", `{"type":"x","a":1}`, false},
		{"error event", `{"type":"error","error":{"code":"server_error"}}`, "error", `{"type":"error","error":{"code":"server_error"}}`, true},
		{"type not first", `{"sequence_number":1, "type":"response.done"}`, "response.done", `{"sequence_number":1, "type":"response.done"}`, false},
		{"error string in text", `{"type":"d","delta":"\"error\":1"}`, "d", `{"type":"d","delta":"\"error\":1"}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			typ, out, isErr := inspectEvent([]byte(tc.in))
			if typ != tc.typ || string(out) != tc.out || isErr != tc.isError {
				t.Errorf("got %q %s %v, want %q %s %v", typ, out, isErr, tc.typ, tc.out, tc.isError)
			}
		})
	}
}
