package schemas

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestWithOutputText(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantText string
	}{
		{"one part", `{"id":"r","output":[{"type":"message","content":[{"type":"output_text","text":"Hello there!"}]}]}`, "Hello there!"},
		{"parts and items joined with no separator",
			`{"id":"r","output":[{"type":"message","content":[{"type":"output_text","text":"a"},{"type":"output_text","text":"b"}]},
			 {"type":"message","content":[{"type":"output_text","text":"c"}]}]}`, "abc"},
		{"other items and parts skipped",
			`{"output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"think"}],"content":[{"type":"output_text","text":"NO"}]},
			 {"type":"message","content":[{"type":"refusal","refusal":"no"},{"type":"output_text","text":"yes"}]},
			 {"type":"function_call","name":"f","arguments":"{}"}]}`, "yes"},
		{"malformed items skipped",
			`{"output":[1,"x",null,{"type":"message","content":"flat"},{"type":5},
			 {"type":"message","content":[{"type":"output_text","text":7},3,{"type":"output_text","text":"ok"}]}]}`, "ok"},
		{"no output", `{"id":"r","status":"completed"}`, ""},
		{"output not an array", `{"output":{"type":"message"}}`, ""},
		{"empty object", `{}`, ""},
		{"empty object with space", "{ \n }", ""},
		{"html and quotes kept readable", `{"output":[{"type":"message","content":[{"type":"output_text","text":"a<b>&\"c\"\n\u00e9"}]}]}`, "a<b>&\"c\"\né"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := WithOutputText([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				OutputText *string `json:"output_text"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("result is not JSON: %v: %s", err, out)
			}
			if got.OutputText == nil || *got.OutputText != tt.wantText {
				t.Errorf("output_text: got %v, want %q", got.OutputText, tt.wantText)
			}
			// Everything before the added field is the original, byte for byte.
			orig := strings.TrimSpace(tt.in)
			prefix := orig[:len(orig)-1]
			if !bytes.HasPrefix(out, []byte(prefix)) || !bytes.HasSuffix(out, []byte("}")) {
				t.Errorf("original bytes not kept:\n in  %s\n out %s", tt.in, out)
			}
			if strings.Contains(string(out), `\u003c`) {
				t.Errorf("HTML escaped: %s", out)
			}
		})
	}
}

func TestWithOutputTextKeepsPresent(t *testing.T) {
	for _, in := range []string{
		`{"output_text":"given","output":[{"type":"message","content":[{"type":"output_text","text":"other"}]}]}`,
		`{"output":[], "output_text": ""}`,
		`{"output_text":null}`,
	} {
		out, err := WithOutputText([]byte(in))
		if err != nil || string(out) != in {
			t.Errorf("got %s, %v; want the input unchanged: %s", out, err, in)
		}
	}
}

func TestWithOutputTextExact(t *testing.T) {
	in := `{"id":"resp_1", "output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}] }`
	want := `{"id":"resp_1", "output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}] ,"output_text":"Hi"}`
	out, err := WithOutputText([]byte(in))
	if err != nil || string(out) != want {
		t.Errorf("got  %s, %v\nwant %s", out, err, want)
	}
}

func TestWithOutputTextRefuses(t *testing.T) {
	for _, in := range []string{``, ` `, `null`, `[]`, `"x"`, `42`, `{`, `{"a":}`, `{"a":1} {}`, `{"a":1}x`, "{}\v", "\f{}"} {
		out, err := WithOutputText([]byte(in))
		if err == nil || !strings.HasPrefix(err.Error(), "schemas: ") {
			t.Errorf("%q: got %s, %v; want a schemas: error", in, out, err)
		}
	}
}

func TestResponseText(t *testing.T) {
	r := Response{Output: []OutputItem{
		{Type: "reasoning", Content: []ContentPart{{Type: "output_text", Text: "no"}}},
		{Type: "message", Content: []ContentPart{{Type: "output_text", Text: "a"}, {Type: "refusal", Text: "no"}, {Type: "output_text", Text: "b"}}},
	}}
	if got := r.Text(); got != "ab" {
		t.Errorf("computed: got %q, want %q", got, "ab")
	}
	r.OutputText = "given"
	if got := r.Text(); got != "given" {
		t.Errorf("given: got %q, want %q", got, "given")
	}
}

func TestEventDecodes(t *testing.T) {
	var ev Event
	if err := json.Unmarshal([]byte(`{"type":"response.output_text.delta","sequence_number":4,"delta":"Hel"}`), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "response.output_text.delta" || ev.Delta != "Hel" || ev.SequenceNumber == nil || *ev.SequenceNumber != 4 {
		t.Errorf("got %+v", ev)
	}
	ev = Event{}
	if err := json.Unmarshal([]byte(`{"type":"response.failed","response":{"id":"r","status":"failed","output":[],"error":{"code":"server_error","message":"boom"}}}`), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Response == nil || ev.Response.Error == nil || ev.Response.Error.Code != "server_error" {
		t.Errorf("got %+v", ev.Response)
	}
}
