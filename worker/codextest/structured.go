package codextest

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Structured outputs: a request whose text.format is json_schema is answered with an instance
// of the schema, json_object with {"answer": <the Answer words>}; the JSON is streamed in a few
// deltas, as the origin streams it. The instance is deterministic: the same prompt and schema
// give the same JSON.

// textFormat is the part of a request's "text" option the server reads.
type textFormat struct {
	Format struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	} `json:"format"`
}

// structuredFormat reads text.format: "json_schema" with its schema, "json_object", or "" for
// plain text (no text option, a format of type text, or one the server cannot read).
func structuredFormat(text json.RawMessage) (typ string, schema map[string]any) {
	var tf textFormat
	if len(text) == 0 || json.Unmarshal(text, &tf) != nil {
		return "", nil
	}
	switch tf.Format.Type {
	case "json_object":
		return "json_object", nil
	case "json_schema":
		if json.Unmarshal(tf.Format.Schema, &schema) != nil || schema == nil {
			schema = map[string]any{}
		}
		return "json_schema", schema
	}
	return "", nil
}

// structuredAnswer is the JSON text answering a turn that asks for a structured output.
func structuredAnswer(t *turn, words int) string {
	answer := strings.Join(answerDeltas(t.prompt, words), "")
	if t.format == "json_object" {
		b, _ := json.Marshal(map[string]string{"answer": answer})
		return string(b)
	}
	g := instanceMaker{root: t.schema, words: strings.Fields(strings.TrimPrefix(answer, AnswerPrefix))}
	b, _ := json.Marshal(g.instance(t.schema, 0))
	return string(b)
}

// instanceMaker makes a value that validates against a JSON Schema of the kind structured
// outputs take: objects (every property), arrays, strings (enum, const, a few formats), numbers
// within their bounds, booleans, null, anyOf/oneOf (the first branch) and local $refs.
type instanceMaker struct {
	root  map[string]any
	words []string
	n     int // values made so far, to vary strings
}

const maxSchemaDepth = 32

func (g *instanceMaker) instance(s map[string]any, depth int) any {
	if depth > maxSchemaDepth || s == nil {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		return g.instance(g.resolve(ref), depth+1)
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if bs, ok := s[k].([]any); ok && len(bs) > 0 {
			b, _ := bs[0].(map[string]any)
			return g.instance(b, depth+1)
		}
	}
	switch schemaType(s) {
	case "object":
		return g.object(s, depth)
	case "array":
		item, _ := s["items"].(map[string]any)
		n := max(1, intOf(s["minItems"]))
		out := make([]any, 0, n)
		for range min(n, 8) {
			out = append(out, g.instance(item, depth+1))
		}
		return out
	case "integer":
		return clamp(s, 42)
	case "number":
		return clamp(s, 4.5)
	case "boolean":
		return true
	case "null":
		return nil
	}
	return g.str(s)
}

func (g *instanceMaker) object(s map[string]any, depth int) map[string]any {
	props, _ := s["properties"].(map[string]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		sub, _ := props[k].(map[string]any)
		out[k] = g.instance(sub, depth+1)
	}
	return out
}

// resolve follows a local reference: #/$defs/X, #/definitions/X or #.
func (g *instanceMaker) resolve(ref string) map[string]any {
	path, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	cur := g.root
	for _, p := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if p == "" {
			continue
		}
		next, _ := cur[strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")].(map[string]any)
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}

// str is a string for s: a value of its format, else some of the Answer words, within
// minLength and maxLength.
func (g *instanceMaker) str(s map[string]any) string {
	g.n++
	var v string
	switch s["format"] {
	case "date-time":
		v = "2026-01-02T03:04:05Z"
	case "date":
		v = "2026-01-02"
	case "time":
		v = "03:04:05"
	case "email":
		v = "sim@example.com"
	case "uri", "url":
		v = "https://example.com/sim"
	case "uuid":
		v = "00000000-0000-4000-8000-000000000000"
	default:
		v = "sim " + strconv.Itoa(g.n)
		if len(g.words) > 0 {
			v = g.words[(g.n-1)%len(g.words)]
		}
	}
	if n := intOf(s["minLength"]); len(v) < n {
		v += strings.Repeat("x", n-len(v))
	}
	if n, ok := s["maxLength"].(float64); ok && len(v) > int(n) {
		v = v[:int(n)]
	}
	return v
}

// schemaType is s's type: its "type", the first non-null one of a list, or what its keywords
// imply.
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if x != "null" {
				if str, ok := x.(string); ok {
					return str
				}
			}
		}
		return "null"
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	if _, ok := s["items"]; ok {
		return "array"
	}
	return "string"
}

// clamp is v within s's minimum/maximum (and their exclusive forms), an integer for an integer
// schema.
func clamp(s map[string]any, v float64) any {
	if lo, ok := s["minimum"].(float64); ok && v < lo {
		v = lo
	}
	if lo, ok := s["exclusiveMinimum"].(float64); ok && v <= lo {
		v = lo + 1
	}
	if hi, ok := s["maximum"].(float64); ok && v > hi {
		v = hi
	}
	if hi, ok := s["exclusiveMaximum"].(float64); ok && v >= hi {
		v = hi - 1
	}
	if schemaType(s) == "integer" {
		return int64(v)
	}
	return v
}

func intOf(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// jsonDeltas splits a structured answer into about four deltas.
func jsonDeltas(text string) []string {
	size := max(1, len(text)/4)
	var out []string
	for len(text) > size {
		out = append(out, text[:size])
		text = text[size:]
	}
	return append(out, text)
}
