package wire

import "encoding/json"

// Web search: the Responses API's hosted web_search tool runs on the origin's side. A request
// declares it as a tool (WebSearchTool); the answer carries a web_search_call output item per
// search (its action, SearchAction, names the query) and the message that follows cites what was
// found as url_citation annotations on its output_text (Citation). The contract's Item type does
// not carry these members, so they are read from the raw item (SearchOf, CitationsOf).

// Web search types.
const (
	TypeWebSearch     = "web_search"      // the Responses tool
	TypeWebSearchCall = "web_search_call" // its output item
	TypeURLCitation   = "url_citation"    // the annotation a cited message carries
	// EventAnnotationAdded is the event that adds one annotation to an output_text part.
	EventAnnotationAdded = "response.output_text.annotation.added"
)

// WebSearchTool is the Responses web_search tool.
type WebSearchTool struct {
	Type         string           `json:"type"` // "web_search"
	Filters      *WebSearchFilter `json:"filters,omitempty"`
	UserLocation *UserLocation    `json:"user_location,omitempty"`
}

// WebSearchFilter limits a search to some domains (and their subdomains).
type WebSearchFilter struct {
	AllowedDomains []string `json:"allowed_domains,omitempty"`
}

// UserLocation is the approximate location a search localises its results to.
type UserLocation struct {
	Type     string `json:"type"` // "approximate"
	City     string `json:"city,omitempty"`
	Region   string `json:"region,omitempty"`
	Country  string `json:"country,omitempty"`
	Timezone string `json:"timezone,omitempty"`
}

// WebSearchCall is a web_search_call input item: a search the model made earlier, replayed.
type WebSearchCall struct {
	Type   string       `json:"type"` // "web_search_call"
	ID     string       `json:"id"`
	Status string       `json:"status"`
	Action SearchAction `json:"action"`
}

// SearchAction is a web_search_call's action. Type "search" has the query (Query, or the newer
// Queries) and, when the request included web_search_call.action.sources, the sources read.
type SearchAction struct {
	Type    string   `json:"type"`
	Query   string   `json:"query,omitempty"`
	Queries []string `json:"queries,omitempty"`
	Sources []Source `json:"sources,omitempty"`
}

// Source is one page a search read.
type Source struct {
	Type string `json:"type"` // "url"
	URL  string `json:"url"`
}

// FirstQuery is the action's query: Query, else the first of Queries.
func (a SearchAction) FirstQuery() string {
	if a.Query == "" && len(a.Queries) > 0 {
		return a.Queries[0]
	}
	return a.Query
}

// Citation is a url_citation annotation: the cited page and the span of text citing it.
type Citation struct {
	Type       string `json:"type"` // "url_citation"
	URL        string `json:"url"`
	Title      string `json:"title"`
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
}

// rawItem is the part of an output item the web search translation reads beyond Item.
type rawItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Status  string        `json:"status"`
	Action  *SearchAction `json:"action"`
	Content []struct {
		Type        string     `json:"type"`
		Annotations []Citation `json:"annotations"`
	} `json:"content"`
}

// rawItemEvent is an item event with its item raw.
type rawItemEvent struct {
	Item json.RawMessage `json:"item"`
}

// SearchOf reads a web_search_call item (raw JSON): its action, and whether it failed. ok is
// false for anything else.
func SearchOf(item []byte) (a SearchAction, failed, ok bool) {
	var it rawItem
	if json.Unmarshal(item, &it) != nil || it.Type != TypeWebSearchCall {
		return SearchAction{}, false, false
	}
	if it.Action != nil {
		a = *it.Action
	}
	return a, it.Status == "failed" || it.Status == "incomplete", true
}

// CitationsOf returns the url_citation annotations of a message item (raw JSON), in order, each
// URL once.
func CitationsOf(item []byte) []Citation {
	var it rawItem
	if json.Unmarshal(item, &it) != nil || it.Type != TypeMessage {
		return nil
	}
	var out []Citation
	seen := map[string]bool{}
	for _, p := range it.Content {
		for _, a := range p.Annotations {
			if a.Type != TypeURLCitation || a.URL == "" || seen[a.URL] {
				continue
			}
			seen[a.URL] = true
			out = append(out, a)
		}
	}
	return out
}

// EventItem returns the raw item of an item event (output_item.added or .done), or nil.
func EventItem(ev []byte) json.RawMessage {
	var e rawItemEvent
	if json.Unmarshal(ev, &e) != nil {
		return nil
	}
	return e.Item
}

// OutputItems returns the raw output items of a response object, in order.
func OutputItems(resp []byte) []json.RawMessage {
	var r struct {
		Output []json.RawMessage `json:"output"`
	}
	_ = json.Unmarshal(resp, &r)
	return r.Output
}
