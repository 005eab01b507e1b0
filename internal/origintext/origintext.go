// Package origintext is how text that came from the origin or its token endpoint is made fit
// to carry on: the credentials it may echo are redacted, it is valid UTF-8 and at most 1 KiB;
// and how the loosely typed values in its error bodies are read. Both the socket client
// (worker/codex) and the login (worker/codex/login) use it.
package origintext

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxText is how much text from the origin an error message keeps.
const MaxText = 1024

// Redacted replaces a secret in text carried over from the origin.
const Redacted = "[redacted]"

// Redactor removes the configured credentials from text that came from the origin.
type Redactor struct {
	secrets []string
}

// minSecret is the shortest credential that is redacted. Real tokens, API keys and account ids
// are far longer; redacting a one-letter test token ("x") would cut that letter out of every
// event and break the answers.
const minSecret = 8

// NewRedactor returns a Redactor of the secrets (those shorter than 8 bytes are kept).
func NewRedactor(secrets ...string) Redactor {
	var r Redactor
	for _, s := range secrets {
		if len(s) >= minSecret {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

// minPartial is the shortest tail of a text that is redacted for looking like the start of a
// secret: the origin's body may have been cut in the middle of an echoed token.
const minPartial = 4

// Clean redacts the secrets from s, makes it valid UTF-8, trims it and cuts it to 1 KiB.
// Redaction happens first, on the bytes as received (a credential need not be valid UTF-8), and
// before the cut so that no prefix of a secret survives it.
func (r Redactor) Clean(s string) string {
	s = r.redact(s, true)
	s = strings.ToValidUTF8(s, "\uFFFD")
	return Truncate(strings.TrimSpace(s), MaxText)
}

// CleanFrame replaces every configured secret in an event frame with [redacted]. A frame without
// one is returned unchanged, the same slice (the common case costs one scan per secret). The
// secrets are bearer tokens and ids, which JSON carries unescaped, so the frame stays valid JSON.
func (r Redactor) CleanFrame(data []byte) []byte {
	for _, sec := range r.secrets {
		if bytes.Contains(data, []byte(sec)) {
			return []byte(r.redact(string(data), false))
		}
	}
	return data
}

// redact replaces each run of s covered by secrets (overlapping or touching) with one [redacted].
// Covering, not replacing
// one secret after the other: secrets may overlap or hold one another, and replacing the first
// would leave the rest of the second in the text. With cut, a tail of s that is the start of a
// secret (at least minPartial bytes) is covered too.
func (r Redactor) redact(s string, cut bool) string {
	var spans []span
	for _, sec := range r.secrets {
		for i := 0; ; {
			j := strings.Index(s[i:], sec)
			if j < 0 {
				break
			}
			spans = append(spans, span{i + j, i + j + len(sec)})
			i += j + 1 // overlapping occurrences too: "aaaaaaaaa" holds "aaaaaaaa" twice
		}
		if !cut {
			continue
		}
		for k := min(len(sec)-1, len(s)); k >= minPartial; k-- {
			if strings.HasSuffix(s, sec[:k]) {
				spans = append(spans, span{len(s) - k, len(s)})
				break
			}
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var b strings.Builder
	b.Grow(len(s))
	done := 0 // s[:done] is written
	for i := 0; i < len(spans); {
		sp := spans[i]
		for i++; i < len(spans) && spans[i].from <= sp.to; i++ {
			sp.to = max(sp.to, spans[i].to)
		}
		b.WriteString(s[done:sp.from])
		b.WriteString(Redacted)
		done = sp.to
	}
	b.WriteString(s[done:])
	return b.String()
}

// span is the byte range [from, to) of a text.
type span struct{ from, to int }

// Truncate cuts s to at most n bytes on a rune boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Str returns a JSON string or number as text; "" for null, absent or anything else.
func Str(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// ErrorDetail is the inside of "error" in an error event or an error body, read liberally.
type ErrorDetail struct {
	Type     json.RawMessage `json:"type"`
	Code     json.RawMessage `json:"code"`
	Message  json.RawMessage `json:"message"`
	ResetsAt json.RawMessage `json:"resets_at"`
	ResetsIn json.RawMessage `json:"resets_in_seconds"`
}

// Detail decodes an "error" value that may be an object or a plain string.
func Detail(raw json.RawMessage) ErrorDetail {
	var d ErrorDetail
	if len(raw) == 0 {
		return d
	}
	if json.Unmarshal(raw, &d) != nil {
		d = ErrorDetail{Message: raw}
	}
	return d
}
