package validate

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/codexpool/codexpool/schemas"
)

func FuzzParseRequest(f *testing.F) {
	for _, tt := range refusals {
		if len(tt.payload) < 4096 {
			f.Add([]byte(tt.payload))
		}
	}
	for _, s := range []string{
		`{"input":"hi","model":"m","stream":true,"metadata":{"a":"b"},"max_output_tokens":5,"tools":[{}],"include":["x"]}`,
		`{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"x":{"y":[1,2.5e3]}}`,
		`{"input":"a\"b\\c\u0000","type":"t","store":true,"stream":false,"typ\u0065":1}`,
		`{"input":"x","input":"y","model":"","model":"m"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := Request(payload)
		if err != nil {
			if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodeInvalidRequest || e.Message == "" {
				t.Fatalf("refusal is %T %v, want an invalid_request *schemas.Error", err, err)
			}
			return
		}
		if !utf8.Valid(payload) {
			t.Fatalf("accepted invalid UTF-8")
		}
		if err := JSON(schemas.RequestSchema, payload); err != nil {
			t.Fatalf("accepted, but request.schema.json refuses it: %v", err)
		}
		up, err := r.Upstream("default")
		if err != nil {
			t.Fatalf("Upstream: %v", err)
		}
		var orig, got map[string]json.RawMessage
		if err := json.Unmarshal(payload, &orig); err != nil {
			t.Fatalf("accepted payload does not decode: %v", err)
		}
		if err := json.Unmarshal(up, &got); err != nil {
			t.Fatalf("Upstream is not a JSON object: %v: %s", err, up)
		}
		if string(got["type"]) != `"response.create"` || string(got["store"]) != "false" || string(got["stream"]) != "true" {
			t.Fatalf("forced fields wrong: %s", up)
		}
		var model string
		if err := json.Unmarshal(got["model"], &model); err != nil || (model != r.Model && (r.Model != "" || model != "default")) {
			t.Fatalf("model: got %s, schemas.Request.Model %q", got["model"], r.Model)
		}
		in := orig["input"]
		if in[0] == '"' {
			var items []struct {
				Content []struct{ Text string } `json:"content"`
			}
			var want string
			if err := json.Unmarshal(got["input"], &items); err != nil || len(items) != 1 || len(items[0].Content) != 1 {
				t.Fatalf("string input became %s", got["input"])
			}
			_ = json.Unmarshal(in, &want)
			if items[0].Content[0].Text != want {
				t.Fatalf("input text: got %q, want %q", items[0].Content[0].Text, want)
			}
		} else if !bytes.Equal(got["input"], in) {
			t.Fatalf("input: got %s, want %s", got["input"], in)
		}
		want := len(orig) + len(missing(orig, "type", "store", "stream", "model"))
		_, ownClientMetadata := orig["client_metadata"]
		for k, v := range orig {
			switch {
			case k == "type", k == "store", k == "stream", k == "model", k == "input":
				continue
			case schemas.NotUpstream[k], k == "metadata" && ownClientMetadata:
				if _, ok := got[k]; ok {
					t.Fatalf("field %q went upstream: the origin refuses it", k)
				}
				want--
				continue
			case k == "metadata":
				k = "client_metadata" // the origin refuses metadata, and takes client_metadata
			}
			if !bytes.Equal(got[k], v) {
				t.Fatalf("field %q: got %s, want %s", k, got[k], v)
			}
		}
		if _, ok := got["metadata"]; ok {
			t.Fatalf("metadata went upstream: %s", up)
		}
		if len(got) != want {
			t.Fatalf("got %d fields, want %d: %s", len(got), want, up)
		}
	})
}

func missing(m map[string]json.RawMessage, keys ...string) []string {
	var out []string
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}
