package codex

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// maxOriginText is how much text from the origin an error message keeps.
const maxOriginText = 1024

// redacted replaces a secret in text carried over from the origin.
const redacted = "[redacted]"

// redactor removes the configured credentials from text that came from the origin.
type redactor struct {
	secrets []string
}

// minSecret is the shortest credential that is redacted. Real tokens, API keys and account ids
// are far longer; redacting a one-letter test token ("x") would cut that letter out of every
// event and break the answers.
const minSecret = 8

func newRedactor(secrets ...string) redactor {
	var r redactor
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

// clean redacts the secrets from s, makes it valid UTF-8, trims it and cuts it to 1 KiB.
// Redaction happens before the cut so that no prefix of a secret survives it.
func (r redactor) clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, redacted)
		// A text that was cut (by the origin or by the handshake reader) may end in part of a secret.
		for k := min(len(sec)-1, len(s)); k >= minPartial; k-- {
			if strings.HasSuffix(s, sec[:k]) {
				s = s[:len(s)-k] + redacted
				break
			}
		}
	}
	s = strings.TrimSpace(s)
	return truncate(s, maxOriginText)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// cleanFrame replaces every configured secret in an event frame with [redacted]. A frame without
// one is returned unchanged (the common case costs one scan per secret). The secrets are bearer
// tokens and ids, which JSON carries unescaped, so the frame stays valid JSON.
func (r redactor) cleanFrame(data []byte) []byte {
	for _, sec := range r.secrets {
		if bytes.Contains(data, []byte(sec)) {
			data = bytes.ReplaceAll(data, []byte(sec), []byte(redacted))
		}
	}
	return data
}
