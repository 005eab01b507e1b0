package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

const longMCP = "mcp__filesystem_server_with_a_very_long_name_that_goes_past_the_limit__read_file"

func TestNamesCollisionRule(t *testing.T) {
	long2 := "mcp__another_server_whose_name_is_also_much_too_long_for_codex__read_file"
	tests := []struct {
		name  string
		tools []string
		want  []string // upstream name of each tool
	}{
		{"names that fit are kept", []string{"a", "b"}, []string{"a", "b"}},
		{"a shortened name gives way to one that fits, wherever it is", []string{longMCP, "mcp__read_file"}, []string{"mcp__read_file_1", "mcp__read_file"}},
		{"shortened names are numbered in order", []string{longMCP, long2}, []string{"mcp__read_file", "mcp__read_file_1"}},
		{"a name repeated maps once", []string{longMCP, longMCP}, []string{"mcp__read_file", "mcp__read_file"}},
		{"a cut name stays within the limit", []string{strings.Repeat("x", 70), strings.Repeat("x", 64)}, []string{strings.Repeat("x", 62) + "_1", strings.Repeat("x", 64)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := NewNames(tt.tools)
			seen := map[string]string{}
			for i, name := range tt.tools {
				up := n.Upstream(name)
				if up != tt.want[i] || len(up) > MaxIDLen {
					t.Errorf("Upstream(%q) = %q, want %q", name, up, tt.want[i])
				}
				if n.Original(up) != name {
					t.Errorf("Original(%q) = %q, want %q", up, n.Original(up), name)
				}
				if o, dup := seen[up]; dup && o != name {
					t.Errorf("%q and %q both go upstream as %q", o, name, up)
				}
				seen[up] = name
			}
		})
	}
}

func TestShortID(t *testing.T) {
	id := strings.Repeat("a", 65)
	got := ShortID(id)
	if len(got) != MaxIDLen || !strings.HasPrefix(got, strings.Repeat("a", 47)+"_") || ShortID(id) != got {
		t.Errorf("ShortID(65 a) = %q", got)
	}
	if ShortID(strings.Repeat("b", 64)) != strings.Repeat("b", 64) {
		t.Error("an id that fits was changed")
	}
	if ShortID(id) == ShortID(id+"x") {
		t.Error("two long ids share a short one")
	}
}

func TestToolParameters(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"absent", ``, `{"type":"object","properties":{}}`},
		{"null", `null`, `{"type":"object","properties":{}}`},
		{"empty", `{}`, `{"type":"object","properties":{}}`},
		{"not an object", `[1]`, `{"type":"object","properties":{}}`},
		{"clean kept byte for byte", `{"type":"object","properties":{"a":{"type":"integer","maximum":9007199254740993}}}`, `{"type":"object","properties":{"a":{"type":"integer","maximum":9007199254740993}}}`},
		{"$schema, cache_control and defer_loading removed", `{"$schema":"x","cache_control":{},"defer_loading":true,"type":"object","properties":{}}`, `{"properties":{},"type":"object"}`},
		{"missing type and properties added", `{"required":[]}`, `{"properties":{},"required":[],"type":"object"}`},
		{"large numbers kept exactly", `{"$schema":"x","properties":{"a":{"maximum":9007199254740993}}}`, `{"properties":{"a":{"maximum":9007199254740993}},"type":"object"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(ToolParameters(json.RawMessage(tt.in))); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCallsFindsByAnyAlias(t *testing.T) {
	var cs Calls[int]
	zero, one := 0, 1
	added := Event{OutputIndex: &zero, Item: &Item{ID: "fc_1", CallID: "call_1", Type: TypeFunction}}
	c := cs.Get(&added, func() *int { v := 7; return &v })
	for _, e := range []Event{{OutputIndex: &zero}, {ItemID: "fc_1"}, {Item: &Item{CallID: "call_1"}}} {
		if cs.Find(&e) != c {
			t.Errorf("Find(%+v) did not find the call", e)
		}
	}
	if cs.Find(&Event{OutputIndex: &one}) != nil || cs.Find(&Event{ItemID: "call_1"}) != nil {
		t.Error("found a call by an alias it never had (an item id is not a call id)")
	}
	if len(cs.List()) != 1 {
		t.Errorf("List has %d calls, want 1", len(cs.List()))
	}
}

func TestPartJSON(t *testing.T) {
	got := string(MustMarshal([]Part{Text("input_text", ""), Image("data:image/png;base64,AA==", ""), File("", "file_1", "")}))
	want := `[{"type":"input_text","text":""},{"type":"input_image","image_url":"data:image/png;base64,AA=="},{"type":"input_file","file_id":"file_1"}]`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}
