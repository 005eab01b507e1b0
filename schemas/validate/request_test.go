package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/codexpool/codexpool/schemas"
)

// nested returns n opening brackets of open, then inner, then the closers.
func nested(open string, n int, inner string) string {
	closer := map[string]string{"[": "]", `{"a":`: "}"}[open]
	return strings.Repeat(open, n) + inner + strings.Repeat(closer, n)
}

func TestParseRequestAccepts(t *testing.T) {
	huge := strings.Repeat("é", 1<<19) // 1 MiB of UTF-8
	tests := []struct {
		name       string
		payload    string
		wantModel  string
		wantStream bool
	}{
		{"contract example", `{"model": "gpt-5.1-codex", "instructions": "Be brief.", "input": "Say hello", "stream": false}`, "gpt-5.1-codex", false},
		{"input only", `{"input":"hi"}`, "", false},
		{"stream true", `{"input":"hi","stream":true}`, "", true},
		{"input items", `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`, "", false},
		{"every known field", `{"input":"x","model":"m","instructions":"i","stream":false,"metadata":{"k":"v"},
			"max_output_tokens":100,"tools":[{"type":"function","name":"f"}],"include":["reasoning.encrypted_content"],
			"reasoning":{"effort":"low"},"text":{"verbosity":"low"},"tool_choice":"auto","parallel_tool_calls":false,
			"service_tier":"auto","prompt_cache_key":"k"}`, "m", false},
		{"empty arrays and objects", `{"input":"x","tools":[],"include":[],"metadata":{}}`, "", false},
		{"integer written with exponent", `{"input":"x","max_output_tokens":1e3}`, "", false},
		{"integer written as 2.0", `{"input":"x","max_output_tokens":2.0}`, "", false},
		{"unknown fields", `{"input":"x","foo":{"bar":[1,null,"z"]},"temperature":0.2,"user":"u"}`, "", false},
		{"empty model means the default", `{"input":"x","model":""}`, "", false},
		{"store and type are overridden, not refused", `{"input":"x","store":true,"type":"whatever"}`, "", false},
		{"huge string input", `{"input":"` + huge + `"}`, "", false},
		{"brackets inside strings do not count as nesting", `{"input":"` + strings.Repeat("[{", 500) + `\"[[["}`, "", false},
		{"nesting at the limit", `{"input":"x","deep":` + nested("[", MaxNesting-1, "1") + `}`, "", false},
		{"duplicate key: last wins", `{"input":"","input":"x"}`, "", false},
		{"whitespace around", " \n\t{\"input\":\"x\"} \n", "", false},
		{"escaped unicode", `{"input":"\u00e9\ud83d\ude00","model":"\u006d"}`, "m", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Request([]byte(tt.payload))
			if err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			if r.Model != tt.wantModel || r.Stream != tt.wantStream {
				t.Errorf("got Model %q Stream %v, want %q %v", r.Model, r.Stream, tt.wantModel, tt.wantStream)
			}
			// The schema must agree with ParseRequest (same document, no hand-only rule involved).
			if err := JSON(schemas.RequestSchema, []byte(tt.payload)); err != nil {
				t.Errorf("request.schema.json refuses what ParseRequest accepts: %v", err)
			}
		})
	}
}

// refusals is the hostile request table shared by the tests, the fuzz seeds and the
// schema-agreement check.
var refusals = []struct {
	name    string
	payload string
	field   string // must appear in the message (a quoted field name, or a phrase)
	hand    bool   // a rule request.schema.json cannot express
}{
	{"empty payload", ``, "empty", true},
	{"blank payload", "  \n", "empty", true},
	{"not JSON", `{"input":`, "not valid JSON", true},
	{"not JSON at all", `hello`, "not valid JSON", true},
	{"trailing garbage", `{"input":"x"} x`, "not valid JSON", true},
	{"invalid UTF-8 in a value", "{\"input\":\"a\xffb\"}", "UTF-8", true},
	{"invalid UTF-8 in a key", "{\"inp\xc3\":\"x\",\"input\":\"x\"}", "UTF-8", true},
	{"array", `[{"input":"x"}]`, "must be a JSON object", false},
	{"string", `"x"`, "must be a JSON object", false},
	{"number", `42`, "must be a JSON object", false},
	{"null", `null`, "must be a JSON object", false},
	{"missing input", `{}`, `"input": is required`, false},
	{"missing input with others", `{"model":"m","stream":true}`, `"input": is required`, false},
	{"empty input string", `{"input":""}`, `"input": must be a non-empty string or a non-empty array`, false},
	{"empty input array", `{"input":[]}`, `"input": must be a non-empty string or a non-empty array`, false},
	{"input number", `{"input":5}`, `"input": must be`, false},
	{"input null", `{"input":null}`, `"input": must be`, false},
	{"input object", `{"input":{"type":"message"}}`, `"input": must be`, false},
	{"input bool", `{"input":true}`, `"input": must be`, false},
	{"input array of strings", `{"input":["hi"]}`, `"input[0]": must be an object`, false},
	{"input array with one non-object", `{"input":[{"type":"message"},2]}`, `"input[1]": must be an object`, false},
	{"duplicate key: last wins", `{"input":"x","input":""}`, `"input": must be`, false},
	{"model number", `{"input":"x","model":5}`, `"model": must be a string`, false},
	{"model null", `{"input":"x","model":null}`, `"model": must be a string`, false},
	{"model object", `{"input":"x","model":{}}`, `"model": must be a string`, false},
	{"instructions number", `{"input":"x","instructions":1}`, `"instructions": must be a string`, false},
	{"instructions array", `{"input":"x","instructions":["a"]}`, `"instructions": must be a string`, false},
	{"stream string", `{"input":"x","stream":"true"}`, `"stream": must be a boolean`, false},
	{"stream number", `{"input":"x","stream":1}`, `"stream": must be a boolean`, false},
	{"stream null", `{"input":"x","stream":null}`, `"stream": must be a boolean`, false},
	{"metadata array", `{"input":"x","metadata":[]}`, `"metadata": must be an object of strings`, false},
	{"metadata string", `{"input":"x","metadata":"a"}`, `"metadata": must be an object of strings`, false},
	{"metadata value number", `{"input":"x","metadata":{"a":"b","c":1}}`, `"metadata.c": must be a string`, false},
	{"metadata value null", `{"input":"x","metadata":{"a":null}}`, `"metadata.a": must be a string`, false},
	{"max_output_tokens zero", `{"input":"x","max_output_tokens":0}`, `"max_output_tokens": must be a positive integer`, false},
	{"max_output_tokens negative", `{"input":"x","max_output_tokens":-5}`, `"max_output_tokens": must be a positive integer`, false},
	{"max_output_tokens fraction", `{"input":"x","max_output_tokens":1.5}`, `"max_output_tokens": must be a positive integer`, false},
	{"max_output_tokens string", `{"input":"x","max_output_tokens":"10"}`, `"max_output_tokens": must be a positive integer`, false},
	{"max_output_tokens null", `{"input":"x","max_output_tokens":null}`, `"max_output_tokens": must be a positive integer`, false},
	{"tools object", `{"input":"x","tools":{}}`, `"tools": must be an array of objects`, false},
	{"tools string", `{"input":"x","tools":"web"}`, `"tools": must be an array of objects`, false},
	{"tools item number", `{"input":"x","tools":[{},3]}`, `"tools[1]": must be an object`, false},
	{"include string", `{"input":"x","include":"a"}`, `"include": must be an array of strings`, false},
	{"include item number", `{"input":"x","include":[1]}`, `"include[0]": must be a string`, false},
	// Outside a session (a header the schema cannot see): refused by hand.
	{"previous_response_id", `{"input":"x","previous_response_id":"resp_1"}`, `"previous_response_id": only in a session`, true},
	{"previous_response_id null", `{"input":"x","previous_response_id":null}`, `"previous_response_id": only in a session`, false},
	{"background true", `{"input":"x","background":true}`, `"background": not supported`, false},
	{"background false", `{"input":"x","background":false}`, `"background": not supported`, false},
	{"forbidden field beats a bad input", `{"input":5,"background":true}`, `"background": not supported`, false},
	{"10000-deep arrays in an unknown field", `{"input":"x","deep":` + nested("[", 10000, "") + `}`, `"deep": nests deeper than 128`, true},
	{"10000-deep objects in input", `{"input":[` + nested(`{"a":`, 10000, "1") + `]}`, `"input": nests deeper than 128`, true},
	{"10000-deep top-level array", nested("[", 10000, ""), "request nests deeper than 128", true},
	{"one past the limit", `{"input":"x","deep":` + nested("[", MaxNesting, "1") + `}`, `"deep": nests deeper`, true},
	{"deep and unterminated", `{"input":"x","deep":` + strings.Repeat("[", 10000), `"deep": nests deeper`, true},
}

func TestParseRequestRefuses(t *testing.T) {
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Request([]byte(tt.payload))
			if err == nil {
				t.Fatalf("accepted %q as %+v, want a refusal", trunc(tt.payload), r)
			}
			e, ok := schemas.AsError(err)
			if !ok {
				t.Fatalf("got %T %v, want *schemas.Error", err, err)
			}
			if e.Code != schemas.CodeInvalidRequest || e.Status != 400 {
				t.Errorf("got %s/%d, want invalid_request/400", e.Code, e.Status)
			}
			if !strings.Contains(e.Message, tt.field) {
				t.Errorf("message %q does not contain %q", e.Message, tt.field)
			}
			if len(e.Message) > 300 || strings.Contains(e.Message, "jsonschema") || strings.Contains(e.Message, "codexpool.dev") {
				t.Errorf("message %q is long or leaks library detail", e.Message)
			}
		})
	}
}

// TestSchemaAgreesWithRefusals checks that every refusal the schema can express is in the
// schema, so clients validating with request.schema.json see the same verdicts.
func TestSchemaAgreesWithRefusals(t *testing.T) {
	for _, tt := range refusals {
		if tt.hand {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			if err := JSON(schemas.RequestSchema, []byte(tt.payload)); err == nil {
				t.Errorf("request.schema.json accepts %q, which ParseRequest refuses", tt.payload)
			}
		})
	}
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func mustParse(t *testing.T, payload string) *schemas.Request {
	t.Helper()
	r, err := Request([]byte(payload))
	if err != nil {
		t.Fatalf("Request(%s): %v", trunc(payload), err)
	}
	return r
}

func mustUpstream(t *testing.T, r *schemas.Request, def string) []byte {
	t.Helper()
	b, err := r.Upstream(def)
	if err != nil {
		t.Fatalf("Upstream: %v", err)
	}
	return b
}

// topLevel returns the top-level keys of the JSON object b in order, with their raw values,
// failing the test on duplicates or invalid JSON.
func topLevel(t *testing.T, b []byte) ([]string, map[string]json.RawMessage) {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("not valid JSON: %s", trunc(string(b)))
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", trunc(string(b)))
	}
	var keys []string
	vals := map[string]json.RawMessage{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		k := tok.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if _, dup := vals[k]; dup {
			t.Fatalf("duplicate key %q in %s", k, trunc(string(b)))
		}
		keys = append(keys, k)
		vals[k] = v
	}
	return keys, vals
}

func TestUpstreamTypicalFrame(t *testing.T) {
	r := mustParse(t, `{"model": "gpt-5.1-codex", "instructions": "Be brief.", "input": "Say hello", "stream": false, "metadata": {"k": "v"}}`)
	got := string(mustUpstream(t, r, "default-model"))
	// metadata, which the origin refuses, goes as client_metadata (sorted under that name).
	want := `{"type":"response.create","model":"gpt-5.1-codex","client_metadata":{"k": "v"},` +
		`"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Say hello"}]}],` +
		`"instructions":"Be brief.","store":false,"stream":true}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if r.Stream {
		t.Errorf("Stream: got true, want false (the client's choice, not the upstream's)")
	}
}

func TestUpstreamStringInput(t *testing.T) {
	raw := `"Say \"hi\" \u00e9 <b> & \n ok"`
	b := mustUpstream(t, mustParse(t, `{"input":`+raw+`}`), "m")
	_, vals := topLevel(t, b)
	wantRaw := `[{"type":"message","role":"user","content":[{"type":"input_text","text":` + raw + `}]}]`
	if string(vals["input"]) != wantRaw {
		t.Errorf("input: got %s, want %s", vals["input"], wantRaw)
	}
	var items []struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(vals["input"], &items); err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Type != "message" || items[0].Role != "user" || len(items[0].Content) != 1 ||
		items[0].Content[0].Type != "input_text" || items[0].Content[0].Text != "Say \"hi\" é <b> & \n ok" {
		t.Errorf("input decodes to %+v", items)
	}
}

func TestUpstreamArrayInputUnchanged(t *testing.T) {
	raw := `[ {"type":"message", "role":"developer","content":[{"type":"input_text","text":"a"}]},
	 {"type":"message","role":"user","content":"b", "extra": 1.50} ]`
	_, vals := topLevel(t, mustUpstream(t, mustParse(t, `{"input":`+raw+`}`), "m"))
	if string(vals["input"]) != raw {
		t.Errorf("input: got %s, want it byte for byte: %s", vals["input"], raw)
	}
}

func TestUpstreamModel(t *testing.T) {
	tests := []struct {
		name, payload, def, want string
	}{
		{"absent: default", `{"input":"x"}`, "gpt-5.1-codex", `"gpt-5.1-codex"`},
		{"empty: default", `{"input":"x","model":""}`, "gpt-5.1-codex", `"gpt-5.1-codex"`},
		{"present: kept", `{"input":"x","model":"o3"}`, "gpt-5.1-codex", `"o3"`},
		{"default needing escapes", `{"input":"x"}`, "m\"\\é", `"m\"\\é"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, vals := topLevel(t, mustUpstream(t, mustParse(t, tt.payload), tt.def))
			if string(vals["model"]) != tt.want {
				t.Errorf("model: got %s, want %s", vals["model"], tt.want)
			}
		})
	}
}

func TestUpstreamForcedFields(t *testing.T) {
	r := mustParse(t, `{"type":"other","store":true,"stream":false,"input":"x","model":"m"}`)
	keys, vals := topLevel(t, mustUpstream(t, r, "d"))
	want := map[string]string{"type": `"response.create"`, "store": `false`, "stream": `true`, "model": `"m"`}
	for k, v := range want {
		if string(vals[k]) != v {
			t.Errorf("%s: got %s, want %s", k, vals[k], v)
		}
	}
	if strings.Join(keys, ",") != "type,model,input,store,stream" {
		t.Errorf("keys: got %v, want type,model,input,store,stream", keys)
	}
}

func TestUpstreamUnknownFieldsByteForByte(t *testing.T) {
	fields := map[string]string{
		"weird":        `{"b" : [1.0, 2e3, "\u00e9", 12345678901234567890123], "a":null}`,
		"text":         `{"verbosity" : "low"}`,
		"reasoning":    `{"effort":"high","summary":"auto"}`,
		"tools":        `[{"type":"function","name":"f","parameters":{"type":"object"}}]`,
		"\u00fcml\"k":  `true`,
		"client_meta":  `{}`,
		"instructions": `"line\nbreak \u2028"`,
	}
	var sb strings.Builder
	sb.WriteString(`{"input":"x"`)
	for k, v := range fields {
		kb, _ := json.Marshal(k)
		sb.WriteString(", " + string(kb) + ":  " + v)
	}
	sb.WriteString("}")
	keys, vals := topLevel(t, mustUpstream(t, mustParse(t, sb.String()), "m"))
	for k, v := range fields {
		if string(vals[k]) != v {
			t.Errorf("%q: got %s, want byte for byte %s", k, vals[k], v)
		}
	}
	if len(keys) != len(fields)+5 {
		t.Errorf("got %d keys %v, want %d", len(keys), keys, len(fields)+5)
	}
}

// TestUpstreamLeavesOutWhatTheOriginRefuses: the fields the Codex origin answers with 400
// "Unsupported parameter" never go upstream; metadata goes as client_metadata, unless the request
// has a client_metadata of its own.
func TestUpstreamLeavesOutWhatTheOriginRefuses(t *testing.T) {
	tests := []struct {
		name, body string
		want       string // the frame's fields between model and store
	}{
		{name: "sampling and limits", body: `{"input":"x","temperature":0.2,"top_p":1,"max_output_tokens":9,"stream_options":{},"safety_identifier":"u","prompt_cache_retention":"24h"}`,
			want: `"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}]`},
		{name: "metadata renamed", body: `{"input":"x","metadata":{"a":"b"}}`, want: `"client_metadata":{"a":"b"},"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}]`},
		{name: "own client_metadata wins", body: `{"input":"x","metadata":{"a":"b"},"client_metadata":{"c":"d"}}`,
			want: `"client_metadata":{"c":"d"},"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(mustUpstream(t, mustParse(t, tt.body), "m"))
			want := `{"type":"response.create","model":"m",` + tt.want + `,"store":false,"stream":true}`
			if got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func TestUpstreamDeterministic(t *testing.T) {
	r := mustParse(t, `{"input":"x","z":1,"a":2,"m":3,"k":{"y":1,"x":2}}`)
	first := mustUpstream(t, r, "d")
	for range 20 {
		if again := mustUpstream(t, r, "d"); !bytes.Equal(again, first) {
			t.Fatalf("Upstream changed between calls:\n%s\n%s", first, again)
		}
	}
	if want := `{"type":"response.create","model":"d","a":2,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}],"k":{"y":1,"x":2},"m":3,"z":1,"store":false,"stream":true}`; string(first) != want {
		t.Errorf("got  %s\nwant %s", first, want)
	}
}

func TestUpstreamErrors(t *testing.T) {
	if _, err := mustParse(t, `{"input":"x"}`).Upstream(""); err == nil || !strings.HasPrefix(err.Error(), "schemas: ") {
		t.Errorf("no model, no default: got %v, want a schemas: error", err)
	}
	if b, err := mustParse(t, `{"input":"x","model":"m"}`).Upstream(""); err != nil || !bytes.Contains(b, []byte(`"model":"m"`)) {
		t.Errorf("model named, no default: got %s, %v", b, err)
	}
	var zero schemas.Request
	if _, err := zero.Upstream("m"); err == nil {
		t.Error("zero schemas.Request: got nil error")
	}
	var nilReq *schemas.Request
	if _, err := nilReq.Upstream("m"); err == nil {
		t.Error("nil schemas.Request: got nil error")
	}
}

func TestParseRequestConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				payload := fmt.Sprintf(`{"input":"n%d","model":"m%d","max_output_tokens":%d}`, i, j, j)
				_, err := Request([]byte(payload))
				if (j == 0) != (err != nil) { // max_output_tokens 0 is the only refusal
					errs <- fmt.Errorf("%s: got %v", payload, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestParseRequestCopiesPayload(t *testing.T) {
	payload := []byte(`{"input":"hello","extra":{"k":"v"}}`)
	r := mustParse(t, string(payload))
	r2, err := Request(payload)
	if err != nil {
		t.Fatal(err)
	}
	before := mustUpstream(t, r, "m")
	for i := range payload { // the caller reuses its buffer
		payload[i] = 'x'
	}
	if after := mustUpstream(t, r2, "m"); !bytes.Equal(before, after) {
		t.Errorf("Upstream changed when the caller's buffer did:\n%s\n%s", before, after)
	}
}

func TestParseRequestUTF8Offset(t *testing.T) {
	_, err := Request([]byte("{\"input\":\"ok\xe2\x82\"}"))
	if e, ok := schemas.AsError(err); !ok || !strings.Contains(e.Message, "at byte 12") {
		t.Errorf("got %v, want the offset of the bad sequence (byte 12)", err)
	}
}
