package codextest

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestStructuredOutput(t *testing.T) {
	schema := map[string]any{"type": "object", "additionalProperties": false,
		"required": []any{"name", "age", "tags", "kind", "home", "score", "nick"},
		"properties": map[string]any{
			"name":  map[string]any{"type": "string", "minLength": 3},
			"age":   map[string]any{"type": "integer", "minimum": 100, "maximum": 120},
			"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 2},
			"kind":  map[string]any{"type": "string", "enum": []any{"cat", "dog"}},
			"home":  map[string]any{"$ref": "#/$defs/place"},
			"score": map[string]any{"type": "number", "exclusiveMaximum": 1},
			"nick":  map[string]any{"type": []any{"null", "string"}},
		},
		"$defs": map[string]any{"place": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}},
	}
	s := newServer(t, Options{Words: 5})
	c := mustDial(t, s)
	format := map[string]any{"format": map[string]any{"type": "json_schema", "name": "person", "strict": true, "schema": schema}}
	evs := readResponseOf(t, c, toolFrame([]any{userMsg("Describe a person")}, nil, map[string]any{"text": format}))
	text := textOf(evs)
	var got struct {
		Name  string   `json:"name"`
		Age   int      `json:"age"`
		Tags  []string `json:"tags"`
		Kind  string   `json:"kind"`
		Score float64  `json:"score"`
		Nick  *string  `json:"nick"`
		Home  struct {
			City string `json:"city"`
		} `json:"home"`
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("answer %q is not an instance of the schema: %v", text, err)
	}
	if len(got.Name) < 3 || got.Age < 100 || got.Age > 120 || len(got.Tags) < 2 || got.Kind != "cat" ||
		got.Score >= 1 || got.Nick == nil || got.Home.City == "" {
		t.Errorf("answer %s breaks the schema's constraints", text)
	}
	if n := strings.Count(strings.Join(types(evs), " "), evDelta); n < 2 {
		t.Errorf("%d text deltas, want the JSON streamed in several", n)
	}
	again := textOf(readResponseOf(t, c, toolFrame([]any{userMsg("Describe a person")}, nil, map[string]any{"text": format})))
	if again != text {
		t.Errorf("same prompt and schema gave %s, then %s", text, again)
	}

	evs = readResponseOf(t, c, toolFrame([]any{userMsg("Say hi")}, nil, map[string]any{"text": map[string]any{"format": map[string]any{"type": "json_object"}}}))
	var obj map[string]string
	if err := json.Unmarshal([]byte(textOf(evs)), &obj); err != nil || !strings.HasPrefix(obj["answer"], AnswerPrefix) {
		t.Errorf("json_object answer %q, want {\"answer\": the Answer words}", textOf(evs))
	}
	plain := textOf(readResponseOf(t, c, toolFrame([]any{userMsg("Say hi")}, nil, map[string]any{"text": map[string]any{"format": map[string]any{"type": "text"}}})))
	if plain != Answer("Say hi", 5) {
		t.Errorf("text format answer %q, want the Answer words", plain)
	}
}

func TestImagesCounted(t *testing.T) {
	s := newServer(t, Options{Words: 2})
	c := mustDial(t, s)
	img := map[string]any{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
	msg := map[string]any{"type": "message", "role": "user", "content": []any{img, img, map[string]any{"type": "input_text", "text": "what is it?"}}}
	readResponseOf(t, c, toolFrame([]any{msg}, nil, nil))
	if got := s.Stats().Images; got != 2 {
		t.Errorf("Stats().Images = %d, want 2", got)
	}
}
