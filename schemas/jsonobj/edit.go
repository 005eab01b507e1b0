package jsonobj

import (
	"bytes"
	"encoding/json"
)

// Unquote decodes the JSON string literal q (a key); escapes are rare in keys, so the plain case
// is a copy. A q that is not a string literal is returned as it is.
func Unquote(q []byte) string {
	if bytes.IndexByte(q, '\\') < 0 && len(q) >= 2 {
		return string(q[1 : len(q)-1])
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return string(q)
	}
	return s
}

// KeyIs reports whether the quoted key q names name. Keys with escapes are decoded first.
func KeyIs(q []byte, name string) bool {
	if bytes.IndexByte(q, '\\') < 0 {
		return len(q) >= 2 && string(q[1:len(q)-1]) == name
	}
	var s string
	return json.Unmarshal(q, &s) == nil && s == name
}

// Field returns the raw value of the member name of the object b whose members are ms (the
// last one when the key repeats, as encoding/json and the pool read it).
func Field(b []byte, ms []Member, name string) (json.RawMessage, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		if KeyIs(b[m.Key[0]:m.Key[1]], name) {
			return b[m.Val[0]:m.Val[1]], true
		}
	}
	return nil, false
}

// Without returns the object b without the members drop reports, keeping every other byte of
// the rest; b itself when nothing is dropped.
func Without(b []byte, ms []Member, drop func(key, val []byte) bool) []byte {
	keep := make([]bool, len(ms))
	dropped := false
	for i, m := range ms {
		keep[i] = !drop(b[m.Key[0]:m.Key[1]], b[m.Val[0]:m.Val[1]])
		dropped = dropped || !keep[i]
	}
	if !dropped {
		return b
	}
	out := make([]byte, 0, len(b))
	out = append(out, '{')
	first := true
	for i, m := range ms {
		if !keep[i] {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, b[m.Key[0]:m.Val[1]]...)
	}
	return append(out, '}')
}

// WithMember returns the object b with the member name set to the JSON value val: the members
// named name are dropped and the new one is appended.
func WithMember(b []byte, ms []Member, name string, val []byte) []byte {
	rest := Without(b, ms, func(k, _ []byte) bool { return KeyIs(k, name) })
	key, _ := json.Marshal(name)
	out := make([]byte, 0, len(rest)+len(key)+len(val)+2)
	out = append(out, rest[:bytes.LastIndexByte(rest, '}')]...)
	if len(TrimSpace(out)) > 1 { // more than "{"
		out = append(out, ',')
	}
	out = append(out, key...)
	out = append(out, ':')
	out = append(out, val...)
	return append(out, '}')
}

var null = []byte("null")

// IsNull reports whether the raw value v is the JSON null.
func IsNull(v []byte) bool { return bytes.Equal(v, null) }
