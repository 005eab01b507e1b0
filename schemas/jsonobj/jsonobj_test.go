package jsonobj

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// pairs renders members as key=value strings.
func pairs(b []byte, ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(b[m.Key[0]:m.Key[1]])+"="+string(b[m.Val[0]:m.Val[1]]))
	}
	return out
}

func TestMembers(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []string
		ok   bool
	}{
		{"empty object", `{}`, nil, true},
		{"spaces", " { \"a\" : 1 ,\n\"b\":\t[1, {\"c\":\"}\"}] } ", []string{`"a"=1`, `"b"=[1, {"c":"}"}]`}, true},
		{"escapes", `{"k\"":"v\\","x":"\"}"}`, []string{`"k\""="v\\"`, `"x"="\"}"`}, true},
		{"nested braces in strings", `{"a":"{[","b":null}`, []string{`"a"="{["`, `"b"=null`}, true},
		{"repeated key", `{"a":1,"a":2}`, []string{`"a"=1`, `"a"=2`}, true},
		{"array", `[1,2]`, nil, false},
		{"string", `"x"`, nil, false},
		{"empty", ``, nil, false},
		{"unterminated", `{"a":1`, nil, false},
		{"unterminated string", `{"a":"1}`, nil, false},
		{"trailing bytes", `{"a":1} {}`, nil, false},
		{"no value", `{"a":}`, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms, ok := Members([]byte(tc.in))
			if got := pairs([]byte(tc.in), ms); ok != tc.ok || !slices.Equal(got, tc.want) {
				t.Errorf("got %q %v, want %q %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestScan(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		limit   int
		want    []string
		deepKey string
		deep    bool
	}{
		{"shallow", `{"a":[[1]],"b":2}`, 3, []string{`"a"=[[1]]`, `"b"=2`}, "", false},
		{"too deep", `{"a":1,"b":[[[1]]]}`, 3, nil, "b", true},
		{"too deep escaped key", `{"\u0062":[[[1]]]}`, 3, nil, "b", true},
		{"outermost too deep", `[[[[1]]]]`, 3, nil, "", true},
		{"brackets in strings", `{"a":"[[[[["}`, 2, []string{`"a"="[[[[["`}, "", false},
		{"not JSON", `{"a":"`, 2, nil, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms, key, deep := Scan([]byte(tc.in), tc.limit)
			if got := pairs([]byte(tc.in), ms); !slices.Equal(got, tc.want) || key != tc.deepKey || deep != tc.deep {
				t.Errorf("got %q %q %v, want %q %q %v", got, key, deep, tc.want, tc.deepKey, tc.deep)
			}
		})
	}
}

func TestEdits(t *testing.T) {
	cases := []struct {
		name string
		in   string
		edit func(b []byte, ms []Member) []byte
		want string
	}{
		{"with into empty", `{}`, setID, `{"id":"j"}`},
		{"with replaces", `{"id":"r","a":1,"id":"s"}`, setID, `{"a":1,"id":"j"}`},
		{"with appends", `{ "a" : 1 }`, setID, `{ "a" : 1 ,"id":"j"}`},
		{"without nulls", `{"a":null, "b" :2,"c":null}`, dropNulls, `{"b" :2}`},
		{"without nothing", `{ "a": 1 }`, dropNulls, `{ "a": 1 }`},
		{"without all", `{"a":null}`, dropNulls, `{}`},
		{"field last wins", `{"a":1,"a":[2]}`, func(b []byte, ms []Member) []byte { v, _ := Field(b, ms, "a"); return v }, `[2]`},
		{"field escaped key", `{"\u0061":true}`, func(b []byte, ms []Member) []byte { v, _ := Field(b, ms, "a"); return v }, `true`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.in)
			ms, _ := Members(b)
			if got := tc.edit(b, ms); string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func setID(b []byte, ms []Member) []byte { return WithMember(b, ms, "id", []byte(`"j"`)) }

func dropNulls(b []byte, ms []Member) []byte {
	return Without(b, ms, func(_, v []byte) bool { return IsNull(v) })
}

func TestKeys(t *testing.T) {
	cases := []struct {
		name, q, unquoted string
	}{
		{"plain", `"a"`, "a"},
		{"escaped", `"\u0061\n"`, "a\n"},
		{"not a string", `x\`, `x\`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unquote([]byte(tc.q)); got != tc.unquoted {
				t.Errorf("Unquote(%s) = %q, want %q", tc.q, got, tc.unquoted)
			}
			if tc.q[0] == '"' && !KeyIs([]byte(tc.q), tc.unquoted) {
				t.Errorf("KeyIs(%s, %q) = false, want true", tc.q, tc.unquoted)
			}
		})
	}
	if KeyIs([]byte(`"ab"`), "a") || KeyIs([]byte(`""`), "a") {
		t.Error("KeyIs matched another name")
	}
}

// FuzzMembers checks the scanner against encoding/json: on every valid object it finds the same
// keys and values, Scan agrees with Members, and dropping members leaves a valid object with the
// rest.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, ` {"a" : [1,{"b":"}"}], "c\"":null , "d":"\\"} `, `[1]`, `{"a":}`, `{"a":1,}`, `"x"`, `{"a":tru}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, isObj := Members(b)
		var want map[string]json.RawMessage
		validObj := json.Valid(b) && json.Unmarshal(b, &want) == nil && want != nil
		if !validObj {
			return // only valid JSON reaches the scanner's results
		}
		if !isObj {
			t.Fatalf("Members(%q) says not an object", b)
		}
		if scanned, _, deep := Scan(b, 1<<20); deep || !slices.Equal(scanned, ms) {
			t.Fatalf("Scan(%q) = %v, Members %v", b, scanned, ms)
		}
		got := map[string]json.RawMessage{}
		for _, m := range ms {
			var k string
			if err := json.Unmarshal(b[m.Key[0]:m.Key[1]], &k); err != nil {
				t.Fatalf("key %q: %v", b[m.Key[0]:m.Key[1]], err)
			}
			// (encoding/json replaces invalid UTF-8, which the plain-key fast path keeps.)
			if utf8.Valid(b[m.Key[0]:m.Key[1]]) && (k != Unquote(b[m.Key[0]:m.Key[1]]) || !KeyIs(b[m.Key[0]:m.Key[1]], k)) {
				t.Fatalf("key %q: Unquote/KeyIs disagree with encoding/json's %q", b[m.Key[0]:m.Key[1]], k)
			}
			got[k] = b[m.Val[0]:m.Val[1]]
		}
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
			t.Fatalf("Members(%q) keys %v, want %v", b, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		for k, v := range want {
			var cg, cw bytes.Buffer
			_ = json.Compact(&cg, got[k])
			_ = json.Compact(&cw, v)
			if !bytes.Equal(cg.Bytes(), cw.Bytes()) {
				t.Fatalf("Members(%q)[%q] = %s, want %s", b, k, got[k], v)
			}
		}
		odd := 0
		out := Without(b, ms, func(_, _ []byte) bool { odd++; return odd%2 == 1 })
		var rest map[string]json.RawMessage
		if err := json.Unmarshal(out, &rest); err != nil {
			t.Fatalf("Without(%q) = %q, not an object: %v", b, out, err)
		}
		if with := WithMember(b, ms, "zz", []byte(`"z"`)); !json.Valid(with) || !strings.HasSuffix(string(with), `"zz":"z"}`) {
			t.Fatalf("WithMember(%q) = %q", b, with)
		}
	})
}
