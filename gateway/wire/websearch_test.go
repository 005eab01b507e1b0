package wire

import (
	"slices"
	"testing"
)

// TestWebSearchItems: a web_search_call's query (query, else the first of queries), its
// failure, and a message's url_citation annotations (in order, each URL once, other
// annotations and other items ignored) are read from the raw items.
func TestWebSearchItems(t *testing.T) {
	searches := []struct {
		name, item, query string
		failed, ok        bool
	}{
		{"query", `{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"go"}}`, "go", false, true},
		{"queries", `{"type":"web_search_call","status":"completed","action":{"type":"search","queries":["a","b"]}}`, "a", false, true},
		{"failed", `{"type":"web_search_call","status":"failed","action":{"type":"search","query":"x"}}`, "x", true, true},
		{"no action", `{"type":"web_search_call","status":"completed"}`, "", false, true},
		{"not a search", `{"type":"message","content":[]}`, "", false, false},
		{"not JSON", `{`, "", false, false},
	}
	for _, tt := range searches {
		a, failed, ok := SearchOf([]byte(tt.item))
		if a.FirstQuery() != tt.query || failed != tt.failed || ok != tt.ok {
			t.Errorf("%s: SearchOf = %+v, %v, %v; want query %q, %v, %v", tt.name, a, failed, ok, tt.query, tt.failed, tt.ok)
		}
	}
	msg := `{"type":"message","content":[{"type":"output_text","text":"t","annotations":[` +
		`{"type":"url_citation","url":"https://a","title":"A","start_index":0,"end_index":1},` +
		`{"type":"file_citation","file_id":"f"},` +
		`{"type":"url_citation","url":"https://b","title":"B","start_index":0,"end_index":1},` +
		`{"type":"url_citation","url":"https://a","title":"A again","start_index":0,"end_index":1}]}]}`
	var urls []string
	for _, c := range CitationsOf([]byte(msg)) {
		urls = append(urls, c.URL+" "+c.Title)
	}
	if want := []string{"https://a A", "https://b B"}; !slices.Equal(urls, want) {
		t.Errorf("CitationsOf = %v, want %v", urls, want)
	}
	if c := CitationsOf([]byte(`{"type":"web_search_call"}`)); c != nil {
		t.Errorf("CitationsOf a search = %v, want none", c)
	}
}
