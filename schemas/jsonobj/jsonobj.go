// Package jsonobj finds the top-level members of a JSON object in one pass, without decoding
// their values, so a caller can read a few members of a large request or event, drop some or set
// one, and leave every other byte as it came (the pool forwards requests unchanged; clients
// compare events byte for byte).
//
// Call [Members] (or [Scan], which also bounds nesting, on bytes not yet known to be JSON) and
// pass its result to [Field], [Without] and [WithMember]. The byte ranges are only meaningful
// on valid JSON: check untrusted input with json.Valid first. The package imports nothing of
// codexpool's.
package jsonobj

import "bytes"

// Member is one top-level member of a JSON object: the byte ranges [from, to) of its key (with
// the quotes) and of its value (without the whitespace around it).
type Member struct{ Key, Val [2]int }

// Scan walks b once, counting brackets outside strings. It reports whether arrays and objects
// nest deeper than limit, and if so the top-level key whose value does (when b is an object;
// "" when the outermost value itself is too deep); otherwise it returns the top-level members.
// It accepts any bytes and never fails: the members are only meaningful once b is known to be a
// valid JSON object.
func Scan(b []byte, limit int) (ms []Member, deepKey string, deep bool) {
	w := walk(b, limit)
	return w.members, w.deepKey, w.deep
}

// Members returns the top-level members of b. ok is false when b is not a JSON object; b is
// otherwise trusted to be valid JSON (check with json.Valid where it may not be: on invalid
// input ok is a best effort).
func Members(b []byte) (ms []Member, ok bool) {
	t := trim(b, 0, len(b))
	if t[0] == t[1] || b[t[0]] != '{' {
		return nil, false
	}
	w := walk(b[:t[1]], -1)
	if w.end != t[1] {
		return nil, false // unterminated, or something after the object
	}
	for _, m := range w.members {
		if m.Key[0] < 0 || m.Val[0] == m.Val[1] {
			return nil, false
		}
	}
	return w.members, true
}

// walked is what walk found.
type walked struct {
	members []Member
	deepKey string
	deep    bool
	end     int // just past the bracket that closes the outermost value; -1 if none does
}

// walk is the one scanner behind Scan and Members; limit < 0 means no nesting limit.
func walk(b []byte, limit int) walked {
	w := walked{end: -1}
	depth := 0
	key := [2]int{-1, -1}
	val := -1 // start of the current top-level value, -1 between members
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			j := stringEnd(b, i)
			if j < 0 {
				return w // unterminated string: not JSON
			}
			if depth == 1 && val < 0 {
				key = [2]int{i, j}
			}
			i = j - 1
		case ':':
			if depth == 1 {
				val = i + 1
			}
		case ',':
			if depth == 1 && val >= 0 {
				w.members = append(w.members, Member{key, trim(b, val, i)})
				val = -1
			}
		case '{', '[':
			depth++
			if limit >= 0 && depth > limit {
				w = walked{deep: true, end: -1}
				if val >= 0 && key[0] >= 0 {
					w.deepKey = Unquote(b[key[0]:key[1]])
				}
				return w
			}
		case '}', ']':
			if depth == 1 && val >= 0 {
				w.members = append(w.members, Member{key, trim(b, val, i)})
				val = -1
			}
			depth--
			if depth == 0 && w.end < 0 {
				w.end = i + 1
			}
		}
	}
	return w
}

// stringEnd returns the index just past the string that starts at b[i] == '"', or -1.
func stringEnd(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexAny(b[j:], `"\`)
		if k < 0 {
			return -1
		}
		j += k
		if b[j] == '"' {
			return j + 1
		}
		j += 2 // skip the escaped character
		if j >= len(b) {
			return -1
		}
	}
}

// trim returns [from, to) without the JSON whitespace around it.
func trim(b []byte, from, to int) [2]int {
	for from < to && isSpace(b[from]) {
		from++
	}
	for to > from && isSpace(b[to-1]) {
		to--
	}
	return [2]int{from, to}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// TrimSpace trims JSON whitespace only; bytes.TrimSpace would also drop \v, \f and Unicode
// spaces, which are not allowed around a JSON value.
func TrimSpace(b []byte) []byte {
	t := trim(b, 0, len(b))
	return b[t[0]:t[1]]
}
