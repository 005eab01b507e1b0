package codextest

import (
	"encoding/json"
	"slices"
	"testing"
)

// searchFrame is a response.create declaring the web_search tool, with extra fields.
func searchFrame(text string, extra map[string]any) []byte {
	req := map[string]any{"type": "response.create", "model": "gpt-5.1-codex", "instructions": "",
		"input": []any{userMsg(text)}, "tools": []any{map[string]any{"type": "web_search"}}, "store": false, "stream": true}
	for k, v := range extra {
		req[k] = v
	}
	b, _ := json.Marshal(req)
	return b
}

// TestWebSearchPlayed: a request with the web_search tool whose user asks to search gets the
// origin's event sequence of a search (web_search_call added in progress, its three
// web_search_call.* events, done with action.search and the query), then a message whose text
// cites every canned result by its title (url_citation annotations, indices in characters, as
// annotation.added events and in the done item); the completed response lists both items and
// Stats counts the search.
func TestWebSearchPlayed(t *testing.T) {
	s := newServer(t, Options{Words: 3})
	c := mustDial(t, s)
	evs := readResponseOf(t, c, searchFrame("Perform a web search for the query: codexpool pools", nil))
	want := []string{evCreated, evInProgress, evItemAdded, evSearchBegun, evSearching, evSearchDone, evItemDone, evItemAdded, evPartAdded}
	if got := types(evs)[:len(want)]; !slices.Equal(got, want) {
		t.Fatalf("events start %v, want %v", got, want)
	}
	if evs[2].get("item.type") != "web_search_call" || evs[2].get("item.status") != "in_progress" {
		t.Errorf("output_item.added %s, want a web_search_call in progress", evs[2].raw)
	}
	id := evs[2].get("item.id")
	for _, e := range evs[3:6] {
		if e.get("item_id") != id || e.get("output_index") != 0.0 {
			t.Errorf("%s: want item_id %v at output_index 0", e.raw, id)
		}
	}
	done := evs[6]
	if done.get("item.status") != "completed" || done.get("item.action.type") != "search" || done.get("item.action.query") != "codexpool pools" {
		t.Errorf("output_item.done %s, want the completed search for the query", done.raw)
	}
	if done.get("item.action.sources") != nil {
		t.Errorf("action.sources without the include: %s", done.raw)
	}
	text := textOf(evs)
	var added []any
	for _, e := range evs {
		if e.typ() == evAnnotationAdd {
			added = append(added, e.get("annotation"))
		}
	}
	last := evs[len(evs)-1]
	if last.typ() != evCompleted || last.get("response.output.0.type") != "web_search_call" || last.get("response.output.1.type") != "message" {
		t.Fatalf("terminal %s, want completed with the search and the message", last.raw)
	}
	anns, _ := last.get("response.output.1.content.0.annotations").([]any)
	if len(anns) != len(SearchResults) || len(added) != len(anns) {
		t.Fatalf("%d annotations in the item, %d added events; want %d", len(anns), len(added), len(SearchResults))
	}
	runes := []rune(text)
	for i, r := range SearchResults {
		a := anns[i].(map[string]any)
		start, end := int(a["start_index"].(float64)), int(a["end_index"].(float64))
		if a["type"] != "url_citation" || a["url"] != r.URL || a["title"] != r.Title || end > len(runes) || string(runes[start:end]) != r.Title {
			t.Errorf("annotation %d %v over %q, want url_citation of %v over its title in %q", i, a, string(runes[min(start, len(runes)):min(end, len(runes))]), r, text)
		}
		if b, _ := json.Marshal(added[i]); string(b) != string(mustJSON(t, a)) {
			t.Errorf("annotation.added %d %s, want %s", i, b, mustJSON(t, a))
		}
	}
	if s.Stats().WebSearches != 1 {
		t.Errorf("Stats().WebSearches = %d, want 1", s.Stats().WebSearches)
	}
	if got := s.WebSearchTools(); len(got) != 1 || string(got[0]) != `{"type":"web_search"}` {
		t.Errorf("WebSearchTools() = %s, want the one tool declared", got)
	}
}

// TestWebSearchTrigger: only a request that declares the web search tool and whose last user
// message says "search" searches; the query is what follows "query:", else the whole message;
// sources come with the include that asks for them; tool directives come first.
func TestWebSearchTrigger(t *testing.T) {
	s := newServer(t, Options{Words: 3})
	c := mustDial(t, s)
	search := func(evs []event) map[string]any {
		out, _ := evs[len(evs)-1].get("response.output").([]any)
		for _, it := range out {
			if m := it.(map[string]any); m["type"] == "web_search_call" {
				return m
			}
		}
		return nil
	}
	t.Run("no tool, no search", func(t *testing.T) {
		evs := readResponseOf(t, c, toolFrame([]any{userMsg("search the web")}, nil, nil))
		if search(evs) != nil {
			t.Error("searched without the web_search tool")
		}
	})
	t.Run("no ask, no search", func(t *testing.T) {
		if search(readResponseOf(t, c, searchFrame("Say hello", nil))) != nil {
			t.Error("searched without being asked")
		}
	})
	t.Run("whole message as the query, sources included", func(t *testing.T) {
		it := search(readResponseOf(t, c, searchFrame("  SEARCH for go  ", map[string]any{"include": []string{includeSources}})))
		a, _ := it["action"].(map[string]any)
		src, _ := a["sources"].([]any)
		if a["query"] != "SEARCH for go" || len(src) != len(SearchResults) || src[0].(map[string]any)["url"] != SearchResults[0].URL {
			t.Errorf("search %v, want the trimmed message as its query and the results as sources", it)
		}
	})
	t.Run("a tool directive comes first", func(t *testing.T) {
		f := toolFrame([]any{userMsg(`search [sim:tool name=Bash args={}]`)}, []string{"Bash"}, map[string]any{
			"tools": []any{map[string]any{"type": "web_search"}, map[string]any{"type": "function", "name": "Bash"}}})
		evs := readResponseOf(t, c, f)
		if search(evs) != nil || len(calls(t, evs)) != 1 {
			t.Errorf("got %s, want the Bash call and no search", evs[len(evs)-1].raw)
		}
	})
}
