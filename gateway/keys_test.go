package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseKeys(t *testing.T) {
	aliceSum := sha256.Sum256([]byte("sk-alice-1"))
	bobHex := hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte("sk-bob-2")); return s[:] }())
	for _, tc := range []struct {
		name string
		file string
		want []Key // checked: name, digest, limits, models, admin
		err  string
	}{
		{name: "yaml object with limits", file: `keys:
  - name: alice
    secret: sk-alice-1
    requests_per_minute: 3
    tokens_per_5h: 1000
    tokens_per_day: 2000
    tokens_per_week: 3000
    max_concurrent: 2
    models: [gpt-5.1-codex]
    admin: true
  - name: bob
    secret_sha256: ` + bobHex + `
`, want: []Key{
			{Name: "alice", SHA256: aliceSum, Admin: true, Models: []string{"gpt-5.1-codex"},
				Limits: Limits{RequestsPerMinute: 3, TokensPer5h: 1000, TokensPerDay: 2000, TokensPerWeek: 3000, MaxConcurrent: 2}},
			{Name: "bob", SHA256: sha256.Sum256([]byte("sk-bob-2"))},
		}},
		{name: "json list", file: `[{"name": "alice", "secret": "sk-alice-1", "models": "gpt-5.1-codex"}]`,
			want: []Key{{Name: "alice", SHA256: aliceSum, Models: []string{"gpt-5.1-codex"}}}},
		{name: "empty", file: " \n", err: "the file is empty"},
		{name: "unknown top field", file: "key:\n  - name: a\n", err: "key (line 1): unknown field (want keys)"},
		{name: "unknown key field", file: "- name: a\n  secret: s\n  rpm: 3\n", err: "keys[0].rpm (line 3): unknown field"},
		{name: "no name", file: "- secret: s\n", err: "keys[0].name (line 1): required"},
		{name: "no secret", file: "- name: a\n", err: `keys[0] (line 1): key "a" has no secret`},
		{name: "both secrets", file: "- name: a\n  secret: s\n  secret_sha256: " + bobHex + "\n", err: "give exactly one"},
		{name: "bad digest", file: "- name: a\n  secret_sha256: abc\n", err: "keys[0].secret_sha256 (line 2): want the secret's SHA-256 as 64 hex digits"},
		{name: "negative limit", file: "- name: a\n  secret: s\n  requests_per_minute: -1\n", err: "keys[0].requests_per_minute (line 3): want a whole number above 0"},
		{name: "text limit", file: "- name: a\n  secret: s\n  max_concurrent: two\n", err: "keys[0].max_concurrent (line 3)"},
		{name: "admin not bool", file: "- name: a\n  secret: s\n  admin: yes please\n", err: "keys[0].admin (line 3): want true or false"},
		{name: "duplicate name", file: "- name: a\n  secret: s1\n- name: a\n  secret: s2\n", err: `keys[1].name (line 3): "a" is also the name of keys[0]`},
		{name: "duplicate secret", file: "- name: a\n  secret: s1\n- name: b\n  secret: s1\n", err: "keys[1] (line 3): key \"b\" has the same secret as keys[0]"},
		{name: "not yaml", file: "- name: [\n", err: "yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKeys([]byte(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got error %v, want one containing %q", err, tc.err)
				}
				for _, secret := range []string{"sk-alice-1", "s1", "s2"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("the error %q holds a secret", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d keys, want %d", len(got), len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Name != w.Name || g.SHA256 != w.SHA256 || g.Limits != w.Limits || g.Admin != w.Admin ||
					strings.Join(g.Models, ",") != strings.Join(w.Models, ",") {
					t.Errorf("key %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestKeyringMatch(t *testing.T) {
	kr := keyring{plainKey("sk-one"), plainKey("sk-two"), {Name: "file", SHA256: sha256.Sum256([]byte("sk-three"))}}
	for _, tc := range []struct {
		name, header, want string
	}{
		{"first", "Bearer sk-one", kr[0].Name},
		{"last", "Bearer sk-three", "file"},
		{"scheme case", "bearer sk-two", kr[1].Name},
		{"unknown", "Bearer sk-four", ""},
		{"no scheme", "sk-one", ""},
		{"basic", "Basic sk-one", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/models", nil)
			r.Header.Set("Authorization", tc.header)
			sum, found := bearer(r)
			got := ""
			if k := kr.match(sum); found && k != nil {
				got = k.Name
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if n := plainKey("sk-one").Name; !strings.HasPrefix(n, "sha256:") || strings.Contains(n, "sk-one") {
		t.Errorf("a plain key's name %q should be a digest prefix", n)
	}
}
