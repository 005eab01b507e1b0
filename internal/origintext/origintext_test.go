package origintext

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

const (
	token   = "sk-0123456789abcdef" // a credential as long as real ones
	account = "acct-SECRET-77"
)

func TestClean(t *testing.T) {
	pad := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{name: "no secrets configured", in: "  origin says no \n", want: "origin says no"},
		{name: "every occurrence", secrets: []string{token, account},
			in:   "bad " + token + " for " + account + "; again " + token,
			want: "bad [redacted] for [redacted]; again [redacted]"},
		{name: "touching occurrences make one", secrets: []string{token},
			in: token + token + " " + token, want: "[redacted] [redacted]"},
		{name: "self-overlapping secret", secrets: []string{"abababab"},
			in: "x ababababab y", want: "x [redacted] y"},
		{name: "secret inside another, the short one first", secrets: []string{"ACCT1234", "tok-ACCT1234-rest"},
			in: "key tok-ACCT1234-rest", want: "key [redacted]"},
		{name: "overlapping secrets", secrets: []string{"AAAA1111BBBB", "BBBB2222CCCC"},
			in: "<AAAA1111BBBB2222CCCC>", want: "<[redacted]>"},
		{name: "secrets shorter than 8 bytes kept", secrets: []string{"x", "short77"},
			in: "x short77 x", want: "x short77 x"},
		{name: "an 8-byte secret redacted", secrets: []string{"eight888"},
			in: "id eight888.", want: "id [redacted]."},
		{name: "text cut inside a secret", secrets: []string{token},
			in: "bad key " + token[:7], want: "bad key [redacted]"},
		{name: "cut inside the second of two secrets", secrets: []string{token, account},
			in: "bad key " + token[:5], want: "bad key [redacted]"},
		{name: "a cut tail of 3 bytes kept", secrets: []string{token},
			in: "bad key sk-", want: "bad key sk-"},
		{name: "a secret's start inside the text is not a cut", secrets: []string{token},
			in: token[:6] + " is fine", want: token[:6] + " is fine"},
		{name: "secret across the 1 KiB cut", secrets: []string{token},
			in: pad(1020) + token + " more", want: pad(1020) + "[red"},
		{name: "text read up to 1 KiB ends inside a secret", secrets: []string{token},
			in: pad(1018) + token[:6], want: pad(1018) + "[redac"},
		{name: "invalid UTF-8 replaced", in: "bad \xff\xfe byte", want: "bad \uFFFD byte"},
		{name: "cut on a rune boundary", in: "a" + strings.Repeat("é", 600), want: "a" + strings.Repeat("é", 511)},
		{name: "secret ending inside a rune", secrets: []string{"\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8"},
			in: "中中中 x", want: "[redacted]\uFFFD x"},
		{name: "secret holding an invalid byte", secrets: []string{"abcdefgh\xff"},
			in: "key abcdefgh\xff end", want: "key [redacted] end"},
		{name: "spaces trimmed after redaction", secrets: []string{token},
			in: " \t" + token + " \n", want: "[redacted]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NewRedactor(tc.secrets...).Clean(tc.in)
			if got != tc.want {
				t.Errorf("Clean(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if !utf8.ValidString(got) || len(got) > MaxText {
				t.Errorf("Clean(%q) = %d bytes, valid UTF-8 %v; want ≤ %d valid", tc.in, len(got), utf8.ValidString(got), MaxText)
			}
		})
	}
}

func TestCleanFrame(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{name: "every occurrence", secrets: []string{token, account},
			in:   `{"type":"error","error":{"message":"` + token + ` of ` + account + `","code":"` + token + `"}}`,
			want: `{"type":"error","error":{"message":"[redacted] of [redacted]","code":"[redacted]"}}`},
		{name: "overlapping secrets", secrets: []string{"AAAA1111BBBB", "BBBB2222CCCC"},
			in: `{"delta":"AAAA1111BBBB2222CCCC"}`, want: `{"delta":"[redacted]"}`},
		{name: "secret inside another", secrets: []string{"ACCT1234", "tok-ACCT1234-rest"},
			in: `{"delta":"tok-ACCT1234-rest"}`, want: `{"delta":"[redacted]"}`},
		{name: "short secrets kept", secrets: []string{"x", "acct"},
			in:   `{"type":"response.output_text.delta","delta":"box text acct"}`,
			want: `{"type":"response.output_text.delta","delta":"box text acct"}`},
		{name: "frames are whole: a secret's start is not a cut", secrets: []string{token},
			in: `{"delta":"` + token[:8], want: `{"delta":"` + token[:8]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NewRedactor(tc.secrets...).CleanFrame([]byte(tc.in))
			if string(got) != tc.want {
				t.Errorf("CleanFrame(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			if json.Valid([]byte(tc.in)) && !json.Valid(got) {
				t.Errorf("CleanFrame(%s) = %s, no longer JSON", tc.in, got)
			}
		})
	}
}

// TestCleanFrameUnchangedIsSameSlice: a caller (codex.redactEvent) reads the event type again only
// when the frame changed, and tells so by the slice it gets back.
func TestCleanFrameUnchangedIsSameSlice(t *testing.T) {
	frame := []byte(`{"type":"response.output_text.delta","delta":"hello"}`)
	got := NewRedactor(token, account).CleanFrame(frame)
	if len(got) != len(frame) || &got[0] != &frame[0] {
		t.Fatalf("CleanFrame of a frame without secrets returned a new slice %q", got)
	}
}

// TestTokensTravelUnescapedInJSON checks the premise of CleanFrame, which matches the raw bytes:
// a JSON encoder (encoding/json, with its HTML escaping on) writes the alphabet of tokens, API
// keys and account ids as is, so the secret is found inside the frame.
func TestTokensTravelUnescapedInJSON(t *testing.T) {
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+/="
	frame, err := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"message": "bad " + alphabet}})
	if err != nil {
		t.Fatal(err)
	}
	got := NewRedactor(alphabet).CleanFrame(frame)
	if bytes.Contains(got, []byte(alphabet)) || !bytes.Contains(got, []byte(Redacted)) {
		t.Fatalf("CleanFrame(%s) = %s: want the token redacted", frame, got)
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		n    int
		want string
	}{
		{name: "shorter", in: "abc", n: 5, want: "abc"},
		{name: "exact", in: "abcde", n: 5, want: "abcde"},
		{name: "ascii", in: "abcdef", n: 4, want: "abcd"},
		{name: "zero", in: "abc", n: 0, want: ""},
		{name: "inside a 2-byte rune", in: "aé", n: 2, want: "a"},
		{name: "inside a 3-byte rune", in: "a中", n: 3, want: "a"},
		{name: "inside a 4-byte rune", in: "a😀b", n: 4, want: "a"},
		{name: "after a 4-byte rune", in: "a😀b", n: 5, want: "a😀"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Truncate(tc.in, tc.n); got != tc.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}

func TestStr(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  string
		want string
	}{
		{name: "absent", raw: "", want: ""},
		{name: "null", raw: "null", want: ""},
		{name: "string", raw: `"usage_limit_reached"`, want: "usage_limit_reached"},
		{name: "escaped string", raw: `"caf\u00e9 \"x\""`, want: `café "x"`},
		{name: "empty string", raw: `""`, want: ""},
		{name: "integer", raw: "429", want: "429"},
		{name: "number kept as written", raw: "1.5e3", want: "1.5e3"},
		{name: "negative", raw: "-2", want: "-2"},
		{name: "number as a string", raw: `"1700000000"`, want: "1700000000"},
		{name: "bool", raw: "true", want: ""},
		{name: "object", raw: `{"code":"x"}`, want: ""},
		{name: "array", raw: `["x"]`, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Str(json.RawMessage(tc.raw)); got != tc.want {
				t.Errorf("Str(%s) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}

func TestDetail(t *testing.T) {
	type texts struct{ typ, code, message, resetsAt, resetsIn string }
	for _, tc := range []struct {
		name string
		raw  string
		want texts
	}{
		{name: "absent", raw: ""},
		{name: "null", raw: "null"},
		{name: "object",
			raw:  `{"type":"usage_limit_reached","code":"rate_limit_exceeded","message":"slow down","resets_at":1700000042,"resets_in_seconds":42}`,
			want: texts{"usage_limit_reached", "rate_limit_exceeded", "slow down", "1700000042", "42"}},
		{name: "numbers as strings, code as a number",
			raw:  `{"code":429,"resets_at":"1700000042","resets_in_seconds":"42.5"}`,
			want: texts{code: "429", resetsAt: "1700000042", resetsIn: "42.5"}},
		{name: "plain string is the message", raw: `"overloaded"`, want: texts{message: "overloaded"}},
		{name: "plain number is the message", raw: `503`, want: texts{message: "503"}},
		{name: "array reads as nothing", raw: `["overloaded"]`},
		{name: "unknown fields ignored", raw: `{"param":"model","detail":"x"}`},
		{name: "a field of the wrong shape reads as nothing", raw: `{"message":{"text":"x"},"code":[1]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Detail(json.RawMessage(tc.raw))
			got := texts{Str(d.Type), Str(d.Code), Str(d.Message), Str(d.ResetsAt), Str(d.ResetsIn)}
			if got != tc.want {
				t.Errorf("Detail(%s) read as %+v, want %+v", tc.raw, got, tc.want)
			}
		})
	}
}

// tokenAlphabet maps fuzzed bytes to the characters of tokens and ids (those already in it stay). Such a secret cannot hold
// "[", "]" or U+FFFD, so it can neither straddle a [redacted] nor be made by the UTF-8 repair.
func tokenAlphabet(b []byte) string {
	const alpha = "ab0123456789-_."
	s := make([]byte, len(b))
	for i, c := range b {
		if strings.IndexByte(alpha, c) >= 0 {
			s[i] = c
		} else {
			s[i] = alpha[int(c)%len(alpha)]
		}
	}
	return string(s)
}

// maskClean is Clean written the slow, obvious way: mark every byte inside an occurrence of a
// secret (and the cut start of one at the end), then write each marked run as one [redacted].
func maskClean(secrets []string, s string) string {
	covered := make([]bool, len(s))
	for _, sec := range secrets {
		if len(sec) < minSecret {
			continue
		}
		for i := 0; i+len(sec) <= len(s); i++ {
			if s[i:i+len(sec)] == sec {
				for j := i; j < i+len(sec); j++ {
					covered[j] = true
				}
			}
		}
		for k := len(sec) - 1; k >= minPartial; k-- {
			if strings.HasSuffix(s, sec[:k]) {
				for j := len(s) - k; j < len(s); j++ {
					covered[j] = true
				}
				break
			}
		}
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !covered[i] {
			b.WriteByte(s[i])
			i++
			continue
		}
		b.WriteString(Redacted)
		for i < len(s) && covered[i] {
			i++
		}
	}
	return Truncate(strings.TrimSpace(strings.ToValidUTF8(b.String(), "\uFFFD")), MaxText)
}

// FuzzClean: whatever the origin sends and whatever the credentials, the result is valid UTF-8,
// at most MaxText bytes, holds no credential nor (for a text that was not cut by Clean itself)
// ends in the start of one, equals the plainly cleaned text when the input holds neither, and
// equals maskClean.
func FuzzClean(f *testing.F) {
	f.Add("bad key sk-0123456789abcdef", []byte("sk-0123456789abcdef"), []byte("acct-77777"))
	f.Add("x ababababab y", []byte("abababab"), []byte("babababa"))
	f.Add("AAAA1111BBBB2222CCCC", []byte("AAAA1111BBBB"), []byte("BBBB2222CCCC"))
	f.Add("tok-ACCT1234-rest", []byte("ACCT1234"), []byte("tok-ACCT1234-rest"))
	f.Add(strings.Repeat("é", 700)+"sk-0123", []byte("sk-0123456789"), []byte(""))
	f.Add("\xff\xfe redacted", []byte("redacted"), []byte("x"))
	f.Fuzz(func(t *testing.T, in string, a, b []byte) {
		secrets := []string{tokenAlphabet(a), tokenAlphabet(b)}
		in = strings.Map(func(r rune) rune { // keep the input's bytes in the secrets' alphabet often enough
			if r >= 'A' && r <= 'Z' {
				return rune(tokenAlphabet([]byte{byte(r)})[0])
			}
			return r
		}, in)
		got := NewRedactor(secrets...).Clean(in)
		if !utf8.ValidString(got) || len(got) > MaxText {
			t.Fatalf("Clean(%q) = %q: %d bytes, valid UTF-8 %v", in, got, len(got), utf8.ValidString(got))
		}
		// What is left of the text between redactions: a trailing piece of a cut [redacted] goes too.
		whole := strings.ReplaceAll(got, Redacted, "\x00")
		rest := whole
		for k := len(Redacted) - 1; k > 0; k-- {
			if strings.HasSuffix(rest, Redacted[:k]) {
				rest = rest[:len(rest)-k]
				break
			}
		}
		found := false
		for _, sec := range secrets {
			if len(sec) < minSecret {
				continue
			}
			if strings.Contains(rest, sec) {
				t.Fatalf("Clean(%q) with secrets %q = %q still holds %q", in, secrets, got, sec)
			}
			cut := strings.TrimRightFunc(in, unicode.IsSpace) == in
			for k := minPartial; k < len(sec); k++ {
				if len(in) <= MaxText/3 && cut && strings.HasSuffix(whole, sec[:k]) {
					t.Fatalf("Clean(%q) with secrets %q = %q ends in %q, the start of a secret", in, secrets, got, sec[:k])
				}
				if strings.HasSuffix(in, sec[:k]) {
					found = true
				}
			}
			found = found || strings.Contains(in, sec)
		}
		if want := Truncate(strings.TrimSpace(strings.ToValidUTF8(in, "\uFFFD")), MaxText); !found && got != want {
			t.Fatalf("Clean(%q) with secrets %q = %q, want %q: nothing to redact", in, secrets, got, want)
		}
		if want := maskClean(secrets, in); got != want {
			t.Fatalf("Clean(%q) with secrets %q\n got %q\nwant %q", in, secrets, got, want)
		}
	})
}
