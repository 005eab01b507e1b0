// Package validate checks documents against codexpool's JSON Schemas (package schemas embeds
// them) and turns request payloads into validated [schemas.Request] values.
//
// A worker calls [Request] first on every incoming payload: it either returns a validated
// *schemas.Request, whose Upstream method is the frame to send to the origin, or a
// *schemas.Error with schemas.CodeInvalidRequest whose message names the offending field.
// [JSON] validates any document against one of the schemas (tests use it to check what they
// put on the wire).
//
// It is a package of its own because it links the JSON Schema compiler: clients that only
// decode replies and errors import package schemas alone.
package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/codexpool/codexpool/schemas"
)

// compiled holds every schema, compiled once on first use. A compiled *jsonschema.Schema is
// read-only, so validation is safe for concurrent use.
var compiled = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	for _, name := range schemas.SchemaNames {
		b, err := schemas.FS.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("schemas: read %s: %w", name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schemas: decode %s: %w", name, err)
		}
		if err := c.AddResource(schemas.BaseURL+name, doc); err != nil {
			return nil, fmt.Errorf("schemas: add %s: %w", name, err)
		}
	}
	out := make(map[string]*jsonschema.Schema, len(schemas.SchemaNames))
	for _, name := range schemas.SchemaNames {
		s, err := c.Compile(schemas.BaseURL + name)
		if err != nil {
			return nil, fmt.Errorf("schemas: compile %s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
})

func schemaFor(name string) (*jsonschema.Schema, error) {
	all, err := compiled()
	if err != nil {
		return nil, err
	}
	s, ok := all[name]
	if !ok {
		return nil, fmt.Errorf("schemas: no schema named %q", name)
	}
	return s, nil
}

// JSON checks the JSON document doc against the schema called name (one of the schemas.*Schema
// constants). The error names the first offending location, e.g.
// `schemas: response.schema.json: "output_text": is required`. Tests in other packages use it
// to check what they put on the wire.
func JSON(name string, doc []byte) error {
	s, err := schemaFor(name)
	if err != nil {
		return err
	}
	v, err := decodeValue(doc)
	if err != nil {
		return fmt.Errorf("schemas: %s: document is not JSON: %w", name, err)
	}
	if err := s.Validate(v); err != nil {
		return &validationError{msg: "schemas: " + name + ": " + describe(err), err: err}
	}
	return nil
}

// validationError carries a short message while keeping the library's detailed error
// reachable through errors.As.
type validationError struct {
	msg string
	err error
}

func (e *validationError) Error() string { return e.msg }
func (e *validationError) Unwrap() error { return e.err }

// decodeValue decodes one JSON value the way the validator wants it: numbers as json.Number,
// so that huge or precise numbers are judged exactly.
func decodeValue(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// fieldRules are the refusal messages for top-level request fields; a wrong value anywhere
// directly in such a field gets this message rather than the schema keyword's.
var fieldRules = map[string]string{
	"input":             "must be a non-empty string or a non-empty array of input items",
	"model":             "must be a string",
	"instructions":      "must be a string",
	"stream":            "must be a boolean",
	"metadata":          "must be an object of strings",
	"max_output_tokens": "must be a positive integer",
	"tools":             "must be an array of objects",
	"include":           "must be an array of strings",
}

// describe turns a jsonschema error into one short message naming the offending location:
// the leaf error of the alphabetically first top-level field, the deepest one within it.
func describe(err error) string {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err.Error()
	}
	var leaves []*jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(verr)
	if len(leaves) == 0 {
		return "invalid"
	}
	loc := func(e *jsonschema.ValidationError) []string {
		if r, ok := e.ErrorKind.(*kind.Required); ok && len(r.Missing) > 0 {
			return append(append([]string(nil), e.InstanceLocation...), r.Missing[0])
		}
		return e.InstanceLocation
	}
	sort.SliceStable(leaves, func(i, j int) bool {
		li, lj := loc(leaves[i]), loc(leaves[j])
		var fi, fj string
		if len(li) > 0 {
			fi = li[0]
		}
		if len(lj) > 0 {
			fj = lj[0]
		}
		if fi != fj {
			return fi < fj
		}
		return len(li) > len(lj)
	})
	e := leaves[0]
	path := loc(e)
	if _, ok := e.ErrorKind.(*kind.Required); ok {
		return quotePath(path) + ": is required"
	}
	if len(path) == 1 {
		if msg, ok := fieldRules[path[0]]; ok {
			return quotePath(path) + ": " + msg
		}
	}
	if len(path) == 0 {
		return "document " + kindMessage(e.ErrorKind)
	}
	return quotePath(path) + ": " + kindMessage(e.ErrorKind)
}

// kindMessage phrases one schema keyword failure without the library's wording.
func kindMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = withArticle(w)
		}
		return "must be " + strings.Join(want, " or ")
	case *kind.MinLength, *kind.MinItems, *kind.MinProperties:
		return "must not be empty"
	case *kind.Minimum:
		return "must be at least " + k.Want.RatString()
	case *kind.Maximum:
		return "must be at most " + k.Want.RatString()
	case *kind.FalseSchema, *kind.Not:
		return "is not supported"
	case *kind.Enum:
		return "has an unsupported value"
	case *kind.Const:
		want, _ := json.Marshal(k.Want)
		return "must be " + string(want)
	default:
		return "is invalid"
	}
}

func withArticle(t string) string {
	switch t {
	case "null":
		return "null"
	case "integer", "array", "object":
		return "an " + t
	default:
		return "a " + t
	}
}

// quotePath renders an instance location as `"input[0].content"`.
func quotePath(p []string) string {
	if len(p) == 0 {
		return "request"
	}
	var b strings.Builder
	b.WriteByte('"')
	for i, s := range p {
		if _, err := strconv.Atoi(s); err == nil && i > 0 {
			b.WriteString("[" + s + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	b.WriteByte('"')
	return b.String()
}
