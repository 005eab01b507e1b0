package gateway

import (
	"bytes"
	"encoding/json"
)

// The gateway edits a few top-level members of request bodies, events and replies (drops nulls,
// "background", an "error": null) and must leave every other byte as it came: the pool forwards
// requests unchanged and clients compare events byte for byte. These helpers find members
// without decoding values, so a 40 KB Codex CLI request costs one scan, not a decode and encode.

// member is one top-level member of a JSON object: the byte ranges of its key (with the quotes)
// and of its value.
type member struct{ key, val [2]int }

// members returns the top-level members of b. ok is false when b is not a JSON object; b is
// otherwise trusted to be valid JSON (callers check with json.Valid where it may not be).
func members(b []byte) (ms []member, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil, true
	}
	for i < len(b) {
		if b[i] != '"' {
			return nil, false
		}
		var m member
		m.key[0] = i
		i = skipString(b, i)
		if i < 0 {
			return nil, false
		}
		m.key[1] = i
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		m.val[0] = i
		i = skipValue(b, i)
		if i < 0 {
			return nil, false
		}
		m.val[1] = i
		ms = append(ms, m)
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case '}':
			return ms, true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return nil, false
		}
	}
	return nil, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"', or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the value starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j)
				if j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) && !bytes.ContainsRune([]byte(" \t\r\n,}]"), rune(b[j])) {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// keyIs reports whether the quoted key q names name. Keys with escapes are decoded first.
func keyIs(q []byte, name string) bool {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1:len(q)-1]) == name
	}
	var s string
	return json.Unmarshal(q, &s) == nil && s == name
}

// field returns the raw value of the top-level member name of the JSON object b (the last one
// when the key repeats, as the pool reads it).
func field(b []byte, ms []member, name string) (json.RawMessage, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		if keyIs(b[m.key[0]:m.key[1]], name) {
			return b[m.val[0]:m.val[1]], true
		}
	}
	return nil, false
}

// without returns b without the members drop reports, keeping every other byte; b itself when
// nothing is dropped.
func without(b []byte, ms []member, drop func(key, val []byte) bool) []byte {
	keep := make([]bool, len(ms))
	dropped := false
	for i, m := range ms {
		keep[i] = !drop(b[m.key[0]:m.key[1]], b[m.val[0]:m.val[1]])
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
		out = append(out, b[m.key[0]:m.val[1]]...)
	}
	return append(out, '}')
}

// withMember returns the object b with the member name set to the JSON value val: the existing
// members named name are dropped and the new one is appended.
func withMember(b []byte, ms []member, name string, val []byte) []byte {
	rest := without(b, ms, func(k, _ []byte) bool { return keyIs(k, name) })
	key, _ := json.Marshal(name)
	out := make([]byte, 0, len(rest)+len(key)+len(val)+2)
	out = append(out, rest[:bytes.LastIndexByte(rest, '}')]...)
	if len(bytes.TrimSpace(out)) > 1 { // more than "{"
		out = append(out, ',')
	}
	out = append(out, key...)
	out = append(out, ':')
	out = append(out, val...)
	return append(out, '}')
}

var jsonNull = []byte("null")

// isNull reports whether the raw value v is the JSON null.
func isNull(v []byte) bool { return bytes.Equal(v, jsonNull) }
