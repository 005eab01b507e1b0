package schemas

import (
	"bytes"
	"encoding/json"
	"testing"
)

func FuzzWithOutputText(f *testing.F) {
	for _, s := range []string{
		`{"id":"r","output":[{"type":"message","content":[{"type":"output_text","text":"a"},{"type":"output_text","text":"b"}]}]}`,
		`{"output":[1,{"type":"message","content":[{"type":"output_text","text":7}]}]}`,
		`{"output_text":"x"}`, `{}`, ` { } `, `[]`, `null`, `{"a":"\u00e9<>"}`, `{"output":{"type":"message"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := WithOutputText(in)
		if err != nil {
			return
		}
		var orig, got map[string]json.RawMessage
		if err := json.Unmarshal(in, &orig); err != nil || orig == nil {
			t.Fatalf("accepted a non-object: %q", in)
		}
		if _, had := orig["output_text"]; had {
			if !bytes.Equal(out, in) {
				t.Fatalf("output_text present, but the response changed: %s", out)
			}
			return
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("result is not a JSON object: %v: %s", err, out)
		}
		var text string
		if err := json.Unmarshal(got["output_text"], &text); err != nil {
			t.Fatalf("output_text is not a string: %s", got["output_text"])
		}
		if len(got) != len(orig)+1 {
			t.Fatalf("got %d fields, want %d", len(got), len(orig)+1)
		}
		for k, v := range orig {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("field %q changed: %s -> %s", k, v, got[k])
			}
		}
	})
}
