package gateway

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

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
			r := normalize([]byte(tc.in))
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

func TestWithMember(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{}`, `{"id":"j"}`},
		{`{"id":"r","a":1}`, `{"a":1,"id":"j"}`},
		{`{"a":1}`, `{"a":1,"id":"j"}`},
	}
	for _, tc := range cases {
		b := []byte(tc.in)
		ms, _ := members(b)
		if got := withMember(b, ms, "id", []byte(`"j"`)); string(got) != tc.want {
			t.Errorf("withMember(%s): got %s, want %s", tc.in, got, tc.want)
		}
	}
}

// FuzzMembers checks the scanner against encoding/json: on every valid object it finds the same
// keys and values, and dropping members leaves a valid object with the rest.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, ` {"a" : [1,{"b":"}"}], "c\"":null , "d":"\\"} `, `[1]`, `{"a":}`, `{"a":1,}`, `"x"`, `{"a":tru}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, isObj := members(b)
		var want map[string]json.RawMessage
		validObj := json.Valid(b) && json.Unmarshal(b, &want) == nil && want != nil
		if !validObj {
			return // only valid JSON reaches the scanner's results
		}
		if !isObj {
			t.Fatalf("members(%q) says not an object", b)
		}
		got := map[string]json.RawMessage{}
		for _, m := range ms {
			var k string
			if err := json.Unmarshal(b[m.key[0]:m.key[1]], &k); err != nil {
				t.Fatalf("key %q: %v", b[m.key[0]:m.key[1]], err)
			}
			got[k] = b[m.val[0]:m.val[1]]
		}
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
			t.Fatalf("members(%q) keys %v, want %v", b, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		for k, v := range want {
			var cg, cw bytes.Buffer
			_ = json.Compact(&cg, got[k])
			_ = json.Compact(&cw, v)
			if !bytes.Equal(cg.Bytes(), cw.Bytes()) {
				t.Fatalf("members(%q)[%q] = %s, want %s", b, k, got[k], v)
			}
		}
		odd := 0
		out := without(b, ms, func(_, _ []byte) bool { odd++; return odd%2 == 1 })
		var rest map[string]json.RawMessage
		if err := json.Unmarshal(out, &rest); err != nil {
			t.Fatalf("without(%q) = %q, not an object: %v", b, out, err)
		}
	})
}
