package codextest

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Web search: a request that declares the hosted web_search tool (or web_search_preview) and
// whose last user message has the word "search" in it (any case) is answered with a search:
//
//   - a web_search_call output item: response.output_item.added (status in_progress), then
//     response.web_search_call.in_progress, .searching and .completed, then
//     response.output_item.done with status completed and action {type:"search", query,
//     queries:[query]} (and action.sources when include asks for
//     "web_search_call.action.sources");
//   - then a message citing SearchResults: its output_text names each result's title, and each
//     title is a url_citation annotation (url, title, start_index, end_index in characters),
//     sent as response.output_text.annotation.added events and in the done part and item.
//
// The query is the text after the last "query:" of that message (Claude Code's WebSearch asks
// "Perform a web search for the query: ..."), else the whole message, trimmed and cut to
// maxQueryLen bytes. Tool results waiting for an answer and tool directives come first.

// A SearchResult is one of the canned pages a simulated search finds.
type SearchResult struct {
	Title, URL string
}

// SearchResults are the pages every simulated search finds, in order.
var SearchResults = []SearchResult{
	{"Codexpool simulator: first search result", "https://example.com/codexpool-sim/search-1"},
	{"Codexpool simulator: second search result", "https://example.org/codexpool-sim/search-2"},
	{"Codexpool simulator: third search result", "https://example.net/codexpool-sim/search-3"},
}

const (
	maxQueryLen     = 200
	includeSources  = "web_search_call.action.sources"
	evSearchBegun   = "response.web_search_call.in_progress"
	evSearching     = "response.web_search_call.searching"
	evSearchDone    = "response.web_search_call.completed"
	evAnnotationAdd = "response.output_text.annotation.added"
)

// searchLog keeps the web search tool declarations of the requests answered.
type searchLog struct {
	mu    sync.Mutex
	tools []json.RawMessage
}

// saw records the web search tools of a request's tools list.
func (l *searchLog) saw(raw json.RawMessage) {
	var tools []json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return
	}
	for _, t := range tools {
		var tool struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(t, &tool) == nil && isWebSearchType(tool.Type) {
			l.mu.Lock()
			l.tools = append(l.tools, slices.Clone(t))
			l.mu.Unlock()
		}
	}
}

func (l *searchLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tools = nil
}

// WebSearchTools returns the web search tools (web_search, web_search_preview...) the requests
// answered declared, each as received, in order since the start or ResetStats.
func (s *Server) WebSearchTools() []json.RawMessage {
	s.searches.mu.Lock()
	defer s.searches.mu.Unlock()
	return slices.Clone(s.searches.tools)
}

// declaresWebSearch reports whether a request's tools include the hosted web search tool.
func declaresWebSearch(raw json.RawMessage) bool {
	var tools []struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &tools)
	for _, t := range tools {
		if isWebSearchType(t.Type) {
			return true
		}
	}
	return false
}

// isWebSearchType reports whether a tool type is the hosted web search: web_search, its dated
// versions (web_search_2025_08_26) and web_search_preview.
func isWebSearchType(typ string) bool {
	return typ == "web_search" || strings.HasPrefix(typ, "web_search_preview") || strings.HasPrefix(typ, "web_search_2")
}

// searchQuery is the query a last user message asks to search for; "" when it asks none.
func searchQuery(lastUser string) string {
	if !strings.Contains(strings.ToLower(lastUser), "search") {
		return ""
	}
	q := lastUser
	if i := strings.LastIndex(strings.ToLower(q), "query:"); i >= 0 {
		q = q[i+len("query:"):]
	}
	q = strings.TrimSpace(q)
	if len(q) > maxQueryLen {
		cut := maxQueryLen
		for cut > 0 && !utf8.RuneStart(q[cut]) {
			cut--
		}
		q = q[:cut]
	}
	if q == "" {
		q = "search"
	}
	return q
}

type searchAction struct {
	Type    string         `json:"type"`
	Query   string         `json:"query,omitempty"`
	Queries []string       `json:"queries,omitempty"`
	Sources []searchSource `json:"sources,omitempty"`
}

type searchSource struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

type searchItem struct {
	ID     string       `json:"id"`
	Type   string       `json:"type"`
	Status string       `json:"status"`
	Action searchAction `json:"action"`
}

type searchEvent struct {
	evHead
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
}

type urlCitation struct {
	Type       string `json:"type"`
	URL        string `json:"url"`
	Title      string `json:"title"`
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
}

type citedPart struct {
	Type        string        `json:"type"`
	Text        string        `json:"text"`
	Annotations []urlCitation `json:"annotations"`
}

type citedItem struct {
	ID      string      `json:"id"`
	Type    string      `json:"type"`
	Status  string      `json:"status"`
	Role    string      `json:"role"`
	Content []citedPart `json:"content"`
}

type citedPartEvent struct {
	evHead
	ItemID       string    `json:"item_id"`
	OutputIndex  int       `json:"output_index"`
	ContentIndex int       `json:"content_index"`
	Part         citedPart `json:"part"`
}

type annotationEvent struct {
	evHead
	ItemID          string      `json:"item_id"`
	OutputIndex     int         `json:"output_index"`
	ContentIndex    int         `json:"content_index"`
	AnnotationIndex int         `json:"annotation_index"`
	Annotation      urlCitation `json:"annotation"`
}

// search adds a web_search_call for t.query and the message citing SearchResults, and returns
// the message's output tokens.
func (b *stepBuilder) search(p plan, t *turn) int {
	idx, id := b.nextIndex(), "ws_sim"+b.id
	item := searchItem{ID: id, Type: "web_search_call", Status: "in_progress", Action: searchAction{Type: "search"}}
	b.add(0, &itemEvent{evHead: evHead{Type: evItemAdded}, OutputIndex: idx, Item: item})
	for _, typ := range []string{evSearchBegun, evSearching, evSearchDone} {
		b.add(0, &searchEvent{evHead: evHead{Type: typ}, ItemID: id, OutputIndex: idx})
	}
	item.Status = "completed"
	item.Action = searchAction{Type: "search", Query: t.query, Queries: []string{t.query}}
	if t.sources {
		for _, r := range SearchResults {
			item.Action.Sources = append(item.Action.Sources, searchSource{Type: "url", URL: r.URL})
		}
	}
	b.add(0, &itemEvent{evHead: evHead{Type: evItemDone}, OutputIndex: idx, Item: item})
	b.output = append(b.output, item)
	deltas, cites := citedText(t.query)
	b.citedMessage(p, deltas, cites)
	return len(strings.Fields(strings.Join(deltas, "")))
}

// citedText is the text of a search's answer, in deltas, and its citation of each result's
// title (indices in characters of the whole text).
func citedText(query string) ([]string, []urlCitation) {
	deltas := []string{AnswerPrefix + "Search results for " + quoted(query) + ":"}
	n := utf8.RuneCountInString(deltas[0])
	var cites []urlCitation
	for i, r := range SearchResults {
		sep := " "
		if i > 0 {
			sep = "; "
		}
		start := n + utf8.RuneCountInString(sep)
		deltas = append(deltas, sep+r.Title)
		n = start + utf8.RuneCountInString(r.Title)
		cites = append(cites, urlCitation{Type: "url_citation", URL: r.URL, Title: r.Title, StartIndex: start, EndIndex: n})
	}
	deltas = append(deltas, ".")
	return deltas, cites
}

// quoted quotes a query for the answer's text.
func quoted(q string) string { return `"` + q + `"` }

// citedMessage adds a message item whose text is deltas with the annotations cites, on p's
// schedule (as message does for text without annotations).
func (b *stepBuilder) citedMessage(p plan, deltas []string, cites []urlCitation) {
	end, idx, msgID := p.latency, b.nextIndex(), "msg_sim"+b.id
	item := outputItem{ID: msgID, Type: "message", Status: "in_progress", Role: "assistant", Content: []contentPart{}}
	b.add(0, &itemEvent{evHead: evHead{Type: evItemAdded}, OutputIndex: idx, Item: item})
	b.add(0, &citedPartEvent{evHead: evHead{Type: evPartAdded}, ItemID: msgID, OutputIndex: idx, Part: citedPart{Type: "output_text", Annotations: []urlCitation{}}})
	for i, d := range deltas {
		b.add(min(p.deltaAt(i), end), &deltaEvent{evHead: evHead{Type: evDelta}, ItemID: msgID, OutputIndex: idx, Delta: d})
	}
	for i, c := range cites {
		b.add(end, &annotationEvent{evHead: evHead{Type: evAnnotationAdd}, ItemID: msgID, OutputIndex: idx, AnnotationIndex: i, Annotation: c})
	}
	full := strings.Join(deltas, "")
	part := citedPart{Type: "output_text", Text: full, Annotations: cites}
	b.add(end, &textDoneEvent{evHead: evHead{Type: evTextDone}, ItemID: msgID, OutputIndex: idx, Text: full})
	b.add(end, &citedPartEvent{evHead: evHead{Type: evPartDone}, ItemID: msgID, OutputIndex: idx, Part: part})
	done := citedItem{ID: msgID, Type: "message", Status: "completed", Role: "assistant", Content: []citedPart{part}}
	if p.fault == FaultIncomplete {
		done.Status = "incomplete"
	} else {
		b.add(end, &itemEvent{evHead: evHead{Type: evItemDone}, OutputIndex: idx, Item: done})
	}
	b.output = append(b.output, done)
}
