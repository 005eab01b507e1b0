package validate

import (
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/codexpool/codexpool/schemas"
)

func readSchema(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := schemas.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func TestSchemasCompileAndDescribeThemselves(t *testing.T) {
	files, err := fs.Glob(schemas.FS, "*.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	names := slices.Clone(schemas.SchemaNames)
	sort.Strings(names)
	if !slices.Equal(files, names) {
		t.Fatalf("embedded files %v, schemas.SchemaNames %v", files, names)
	}
	for _, name := range schemas.SchemaNames {
		t.Run(name, func(t *testing.T) {
			if _, err := schemaFor(name); err != nil {
				t.Fatal(err)
			}
			m := readSchema(t, name)
			if got, want := m["$id"], schemas.BaseURL+name; got != want {
				t.Errorf("$id: got %v, want %v", got, want)
			}
			if got := m["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema: got %v, want draft 2020-12", got)
			}
			for _, k := range []string{"title", "description"} {
				if s, _ := m[k].(string); len(s) < 10 {
					t.Errorf("%s: got %q, want a real one", k, s)
				}
			}
			// The examples in the documentation must themselves be valid.
			examples, _ := m["examples"].([]any)
			if len(examples) == 0 {
				t.Errorf("no examples")
			}
			for i, ex := range examples {
				b, _ := json.Marshal(ex)
				if err := JSON(name, b); err != nil {
					t.Errorf("examples[%d] %s: %v", i, b, err)
				}
			}
		})
	}
	if err := JSON("nope.schema.json", []byte(`{}`)); err == nil {
		t.Error("Validate with an unknown schema name: got nil error")
	}
}

func TestErrorCodesMatchSchema(t *testing.T) {
	errSchema := readSchema(t, schemas.ErrorSchema)
	code := errSchema["properties"].(map[string]any)["error"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)
	var enum []string
	for _, v := range code["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	var goCodes []string
	for _, c := range schemas.Codes() {
		goCodes = append(goCodes, string(c))
	}
	sort.Strings(enum)
	sort.Strings(goCodes)
	if !slices.Equal(enum, goCodes) {
		t.Errorf("error.schema.json code enum %v, Go codes %v", enum, goCodes)
	}
}

func TestErrorBodiesValidate(t *testing.T) {
	for _, c := range schemas.Codes() {
		t.Run(string(c), func(t *testing.T) {
			plain := schemas.Errorf(c, "something about %q", "field")
			if err := JSON(schemas.ErrorSchema, plain.Body()); err != nil {
				t.Errorf("%s: %v", plain.Body(), err)
			}
			full := &schemas.Error{Status: c.Status(), Code: c, Message: "m", RetryAfter: 1500 * time.Microsecond, UpstreamCode: "usage_limit_reached", Account: "team-b"}
			if err := JSON(schemas.ErrorSchema, full.Body()); err != nil {
				t.Errorf("%s: %v", full.Body(), err)
			}
		})
	}
}

func TestReplyValidates(t *testing.T) {
	completed := []byte(`{"id":"resp_1","object":"response","created_at":1738888888,"status":"completed","model":"gpt-5.1-codex",
		"output":[{"id":"rs_1","type":"reasoning","summary":[]},
		          {"id":"msg_1","type":"message","role":"assistant","status":"completed",
		           "content":[{"type":"output_text","text":"Hello","annotations":[]},{"type":"output_text","text":" there!"}]}],
		"usage":{"input_tokens":42,"output_tokens":5,"total_tokens":47},"error":null,"incomplete_details":null}`)
	if err := JSON(schemas.ResponseSchema, completed); err == nil || !strings.Contains(err.Error(), `"output_text": is required`) {
		t.Errorf("response without output_text: got %v, want it refused naming output_text", err)
	}
	reply, err := schemas.WithOutputText(completed)
	if err != nil {
		t.Fatal(err)
	}
	if err := JSON(schemas.ResponseSchema, reply); err != nil {
		t.Errorf("WithOutputText's reply: %v", err)
	}
	var r schemas.Response
	if err := json.Unmarshal(reply, &r); err != nil {
		t.Fatal(err)
	}
	if r.ID != "resp_1" || r.Status != "completed" || r.OutputText != "Hello there!" || r.Usage == nil || r.Usage.TotalTokens != 47 {
		t.Errorf("Response decodes to %+v", r)
	}
}

func TestEventSchema(t *testing.T) {
	for _, ok := range []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}`,
		`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}`,
		`{"type":"error","status":429,"error":{"type":"usage_limit_reached","message":"m"}}`,
		`{"type":"codex.rate_limits","anything":[1,2]}`,
	} {
		if err := JSON(schemas.EventSchema, []byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{`{}`, `{"type":5}`, `[]`, `{"type":""}`} {
		if err := JSON(schemas.EventSchema, []byte(bad)); err == nil {
			t.Errorf("%s: accepted, want refused", bad)
		}
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name, schema, doc, want string
	}{
		{"missing field", schemas.ErrorSchema, `{"error":{"code":"worker_busy","status":429}}`, `schemas: error.schema.json: "error.message": is required`},
		{"bad enum", schemas.ErrorSchema, `{"error":{"code":"nope","message":"m","status":400}}`, `"error.code": has an unsupported value`},
		{"empty account", schemas.ErrorSchema, `{"error":{"code":"upstream_rate_limited","message":"m","status":429,"account":""}}`, `"error.account": must not be empty`},
		{"account not a string", schemas.ErrorSchema, `{"error":{"code":"upstream_rate_limited","message":"m","status":429,"account":7}}`, `"error.account": must be a string`},
		{"status too low", schemas.ErrorSchema, `{"error":{"code":"worker_busy","message":"m","status":200}}`, `"error.status": must be at least 400`},
		{"nested item", schemas.ResponseSchema, `{"id":"r","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":1}]}],"output_text":""}`, `"output[0].content[0].text": must be a string`},
		{"wrong object", schemas.ResponseSchema, `{"id":"r","object":"thing","status":"completed","output":[],"output_text":""}`, `"object": must be "response"`},
		{"root type", schemas.RequestSchema, `[]`, `document must be an object`},
		{"not JSON", schemas.RequestSchema, `{`, `not JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := JSON(tt.schema, []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	var verr *jsonschema.ValidationError
	if err := JSON(schemas.EventSchema, []byte(`{}`)); !errors.As(err, &verr) {
		t.Errorf("got %T, want it to wrap *jsonschema.ValidationError", err)
	}
}
