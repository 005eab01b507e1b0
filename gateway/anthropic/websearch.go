package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/codexpool/codexpool/gateway/wire"
)

// Web search (design/clients.md §1 "Tools", §2, §4). Anthropic's web search server tool
// (web_search_20250305, web_search_20260209 and later dated versions) becomes the Responses
// web_search tool, which runs on the origin's side. Each web_search_call the origin answers with
// becomes a server_tool_use block (name web_search, input {query}) and a web_search_tool_result
// block whose results are the url_citation annotations of the message that follows the search
// (the page titles and URLs the answer cites); the origin's sources, when it lists them, come
// first. The text blocks themselves carry no citations: Anthropic's web_search_result_location
// needs an encrypted index the origin has no equivalent of.
//
// What the Responses tool cannot say is dropped: max_uses (the origin decides how often to
// search) and blocked_domains (its filters only allow domains).

// webSearchPrefix starts the type of every version of the web search server tool.
const webSearchPrefix = "web_search_2"

// serverToolName is the name every web search block carries.
const serverToolName = "web_search"

func isWebSearch(typ string) bool { return strings.HasPrefix(typ, webSearchPrefix) }

// webSearchTool is the Responses tool of a web search server tool.
func webSearchTool(t tool) wire.WebSearchTool {
	out := wire.WebSearchTool{Type: wire.TypeWebSearch}
	if len(t.AllowedDomains) > 0 {
		out.Filters = &wire.WebSearchFilter{AllowedDomains: t.AllowedDomains}
	}
	if l := t.UserLocation; l != nil && (l.City != "" || l.Region != "" || l.Country != "" || l.Timezone != "") {
		loc := *l
		loc.Type = "approximate"
		out.UserLocation = &loc
	}
	return out
}

// webSearchChoice is the tool_choice forcing a search when name is the web search tool the
// request declares: the web_search tool allowed and required. A choice of "web_search" with no
// such tool declared is "auto": forcing an unregistered web search fails upstream.
func webSearchChoice(name string, tools []tool) (json.RawMessage, bool) {
	for _, t := range tools {
		if t.Name == name && isWebSearch(t.Type) {
			return json.RawMessage(`{"type":"allowed_tools","mode":"required","tools":[{"type":"web_search"}]}`), true
		}
		if t.Name == name {
			return nil, false
		}
	}
	if name == serverToolName {
		return json.RawMessage(`"auto"`), true
	}
	return nil, false
}

// searchInput is the input item of a server_tool_use block replayed in the history: a
// web_search_call when the origin made it (its id is the origin's, "ws_..."), so the model
// sees that it searched; nothing for another server's (a real Anthropic search before a model
// switch), whose id the origin would refuse. Its web_search_tool_result is never sent: the
// assistant text that follows carries what the search found.
func searchInput(bl block) (wire.WebSearchCall, bool) {
	if !strings.HasPrefix(bl.ID, "ws_") {
		return wire.WebSearchCall{}, false
	}
	var in struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(bl.Input, &in)
	return wire.WebSearchCall{Type: wire.TypeWebSearchCall, ID: bl.ID, Status: "completed",
		Action: wire.SearchAction{Type: "search", Query: in.Query}}, true
}

// search is one web_search_call of the answer.
type search struct {
	id     string
	query  string
	failed bool
	found  []wire.Source
}

// searchOf reads the web_search_call item raw; ok is false for any other item.
func searchOf(raw []byte) (search, bool) {
	a, failed, ok := wire.SearchOf(raw)
	if !ok {
		return search{}, false
	}
	var it struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &it)
	return search{id: it.ID, query: a.FirstQuery(), failed: failed, found: a.Sources}, true
}

// useBlock is the search's server_tool_use block, input included (the non-streamed shape).
func (s search) useBlock() obj {
	return obj{"type": "server_tool_use", "id": s.id, "name": serverToolName,
		"input": obj{"query": s.query}, "caller": obj{"type": "direct"}}
}

// resultBlock is the search's web_search_tool_result block: its sources, then the pages cited
// (each URL once), or the error of a failed search.
func (s search) resultBlock(cited []wire.Citation) obj {
	var content any
	if s.failed {
		content = obj{"type": "web_search_tool_result_error", "error_code": "unavailable"}
	} else {
		content = results(s.found, cited)
	}
	return obj{"type": "web_search_tool_result", "tool_use_id": s.id, "content": content,
		"caller": obj{"type": "direct"}}
}

func results(found []wire.Source, cited []wire.Citation) []any {
	out := []any{}
	seen := map[string]bool{}
	add := func(url, title string) {
		if url == "" || seen[url] {
			return
		}
		seen[url] = true
		out = append(out, obj{"type": "web_search_result", "title": title, "url": url,
			"encrypted_content": "", "page_age": nil})
	}
	titles := map[string]string{}
	for _, c := range cited {
		titles[c.URL] = c.Title
	}
	for _, f := range found {
		add(f.URL, titles[f.URL])
	}
	for _, c := range cited {
		add(c.URL, c.Title)
	}
	return out
}

// searchBlocks are the blocks of the web_search_call at output[i]: server_tool_use, then
// web_search_tool_result with the citations of the message right after it, if one is.
func searchBlocks(output []json.RawMessage, i int) []any {
	s, ok := searchOf(output[i])
	if !ok {
		return nil
	}
	var cited []wire.Citation
	if i+1 < len(output) {
		cited = wire.CitationsOf(output[i+1])
	}
	return []any{s.useBlock(), s.resultBlock(cited)}
}

// searchStream is a Stream's state of the web search in progress: its server_tool_use block
// went out, its web_search_tool_result waits for the citations of the message after it, and
// the events meanwhile (that message's text among them) wait with it.
type searchStream struct {
	pending *search
	held    [][]byte
	count   int // web searches in the answer, for usage.server_tool_use
}

// holdsFor reports whether e waits for the pending search's result: everything but the events
// that end the wait (the next message done, the next search done, the end of the response).
func (ss *searchStream) holdsFor(e *wire.Event) bool {
	if ss.pending == nil {
		return false
	}
	switch e.Type {
	case wire.EventItemDone:
		return e.Item.Type != wire.TypeMessage && e.Item.Type != wire.TypeWebSearchCall
	case wire.EventCompleted, wire.EventIncomplete, "response.done", wire.EventFailed, "error":
		return false
	}
	return true
}

// searchDone sends the server_tool_use block of a finished web_search_call (the query as its
// one input_json_delta) and makes it the pending search.
func (s *Stream) searchDone(raw []byte) {
	sr, ok := searchOf(wire.EventItem(raw))
	if !ok {
		return
	}
	s.search.count++
	s.startBlock("server_tool_use", sr.id, obj{"type": "server_tool_use", "id": sr.id,
		"name": serverToolName, "input": obj{}, "caller": obj{"type": "direct"}})
	s.delta(obj{"type": "input_json_delta", "partial_json": string(marshal(obj{"query": sr.query}))})
	s.closeBlock()
	s.search.pending = &sr
}

// flushSearch sends the pending search's web_search_tool_result block with cited, then
// replays the events that waited for it.
func (s *Stream) flushSearch(cited []wire.Citation) {
	sr := s.search.pending
	if sr == nil {
		return
	}
	s.search.pending = nil
	s.startBlock("web_search_tool_result", sr.id, sr.resultBlock(cited))
	s.closeBlock()
	held := s.search.held
	s.search.held = nil
	for _, ev := range held {
		s.handle(ev)
	}
}

// endSearchWait ends the wait of the pending search at event e (not held): a message done
// gives its citations, anything else none.
func (s *Stream) endSearchWait(e *wire.Event, raw []byte) {
	if s.search.pending == nil {
		return
	}
	var cited []wire.Citation
	if e.Type == wire.EventItemDone && e.Item.Type == wire.TypeMessage {
		cited = wire.CitationsOf(wire.EventItem(raw))
	}
	s.flushSearch(cited)
}
