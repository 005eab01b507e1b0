package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/gateway/wire"
)

// TestTranslateWebSearch: the web search server tool, every dated version of it, becomes the
// Responses web_search tool (allowed domains as its filter, the location as is; max_uses and
// blocked_domains, which it cannot say, left out); a tool_choice naming it forces it, one naming
// an unregistered web_search forces nothing; searches replayed in the history become
// web_search_call items when the origin made them, and their results are not sent.
func TestTranslateWebSearch(t *testing.T) {
	const ask = `"messages":[{"role":"user","content":"Perform a web search for the query: go"}]`
	cases := []struct {
		name         string
		body         string
		want, absent []string
	}{
		{name: "web_search_20250305 with its options",
			body:   `{` + ask + `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":8,"allowed_domains":["go.dev"],"blocked_domains":["evil.example"],"user_location":{"type":"approximate","city":"Lyon","country":"FR","timezone":"Europe/Paris"}}]}`,
			want:   []string{`"tools":[{"type":"web_search","filters":{"allowed_domains":["go.dev"]},"user_location":{"type":"approximate","city":"Lyon","country":"FR","timezone":"Europe/Paris"}}]`},
			absent: []string{"max_uses", "blocked", "evil.example", "web_search_2025"}},
		{name: "web_search_20260209, bare",
			body: `{` + ask + `,"tools":[{"type":"web_search_20260209","name":"web_search"}]}`,
			want: []string{`"tools":[{"type":"web_search"}]`}, absent: []string{"filters", "user_location"}},
		{name: "beside a function tool, other server tools left out",
			body: `{` + ask + `,"tools":[{"name":"Bash","input_schema":{"type":"object","properties":{}}},{"type":"web_fetch_20250910","name":"web_fetch"},{"type":"web_search_20250305","name":"web_search"}]}`,
			want: []string{`"tools":[{"type":"function","name":"Bash","parameters":{"type":"object","properties":{}},"strict":false},{"type":"web_search"}]`}, absent: []string{"web_fetch"}},
		{name: "tool_choice naming the web search tool forces it",
			body: `{` + ask + `,"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"web_search"}}`,
			want: []string{`"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"web_search"}]}`}},
		{name: "a web_search tool_choice without the tool forces nothing",
			body: `{` + ask + `,"tools":[{"name":"Bash","input_schema":{}}],"tool_choice":{"type":"tool","name":"web_search"}}`,
			want: []string{`"tool_choice":"auto"`}, absent: []string{`"type":"web_search"`, `"name":"web_search"`}},
		{name: "a function tool named web_search is a function",
			body: `{` + ask + `,"tools":[{"name":"web_search","input_schema":{}}],"tool_choice":{"type":"tool","name":"web_search"}}`,
			want: []string{`"tool_choice":{"type":"function","name":"web_search"}`}},
		{name: "history: the origin's search replayed, results not sent",
			body:   `{"messages":[{"role":"user","content":"search go"},{"role":"assistant","content":[{"type":"server_tool_use","id":"ws_sim1","name":"web_search","input":{"query":"go"}},{"type":"web_search_tool_result","tool_use_id":"ws_sim1","content":[{"type":"web_search_result","title":"The Go site","url":"https://go.dev/","encrypted_content":""}]},{"type":"text","text":"Go is at go.dev."}]},{"role":"user","content":"thanks"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`,
			want:   []string{`{"type":"message","role":"user","content":[{"type":"input_text","text":"search go"}]},{"type":"web_search_call","id":"ws_sim1","status":"completed","action":{"type":"search","query":"go"}},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Go is at go.dev."}]}`},
			absent: []string{"web_search_tool_result", "The Go site", "unsupported"}},
		{name: "history: another server's search dropped",
			body: `{"messages":[{"role":"user","content":"search go"},{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_01","name":"web_search","input":{"query":"go"}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_01","content":[]},{"type":"text","text":"Found."}]}]}`,
			want: []string{`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Found."}]}`}, absent: []string{"srvtoolu", "web_search_call", "unsupported"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Translate([]byte(tc.body), Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !bytes.Contains(tr.Body, []byte(w)) {
					t.Errorf("got %s\nwant it to contain %s", tr.Body, w)
				}
			}
			for _, a := range tc.absent {
				if bytes.Contains(tr.Body, []byte(a)) {
					t.Errorf("got %s\nwant no %s", tr.Body, a)
				}
			}
		})
	}
}

// webSearchGolden are the recorded web search streams: the simulator's search (the origin's
// event shapes: output_item.added, web_search_call.*, output_item.done with action.query, then
// a message with url_citation annotations), two searches in a row (sources, queries, repeated
// citations), and a failed search followed by a function call.
var webSearchGolden = []struct {
	name string
	// checks are substrings the stream's frames must contain, message those of the
	// non-streamed message.
	checks, message []string
}{
	{"web_search",
		[]string{`"content_block":{"caller":{"type":"direct"},"id":"ws_sim1","input":{},"name":"web_search","type":"server_tool_use"}`,
			`"partial_json":"{\"query\":\"codexpool pools\"}"`,
			`"title":"Codexpool simulator: first search result","type":"web_search_result","url":"https://example.com/codexpool-sim/search-1"`,
			`"tool_use_id":"ws_sim1","type":"web_search_tool_result"`,
			`"server_tool_use":{"web_search_requests":1}`, `"stop_reason":"end_turn"`},
		[]string{`{"caller":{"type":"direct"},"id":"ws_sim1","input":{"query":"codexpool pools"},"name":"web_search","type":"server_tool_use"},{"caller":{"type":"direct"},"content":[{"encrypted_content":"","page_age":null,"title":"Codexpool simulator: first search result","type":"web_search_result","url":"https://example.com/codexpool-sim/search-1"},{"encrypted_content":"","page_age":null,"title":"Codexpool simulator: second search result","type":"web_search_result","url":"https://example.org/codexpool-sim/search-2"},{"encrypted_content":"","page_age":null,"title":"Codexpool simulator: third search result","type":"web_search_result","url":"https://example.net/codexpool-sim/search-3"}],"tool_use_id":"ws_sim1","type":"web_search_tool_result"},{"text":"[codexpool sim] Search results for`,
			`"server_tool_use":{"web_search_requests":1}`, `"stop_reason":"end_turn"`}},
	{"web_search_two",
		[]string{`"partial_json":"{\"query\":\"go 1.26 release\"}"`, `"partial_json":"{\"query\":\"go 1.26 generic methods\"}"`,
			`"content":[{"encrypted_content":"","page_age":null,"title":"","type":"web_search_result","url":"https://go.dev/doc/go1.26"}],"tool_use_id":"ws_a"`,
			`"content":[{"encrypted_content":"","page_age":null,"title":"Go 1.26 Release Notes","type":"web_search_result","url":"https://go.dev/doc/go1.26"},{"encrypted_content":"","page_age":null,"title":"Go 1.26 is released","type":"web_search_result","url":"https://go.dev/blog/go1.26"}],"tool_use_id":"ws_b"`,
			`"server_tool_use":{"web_search_requests":2}`},
		[]string{`"server_tool_use":{"web_search_requests":2}`, `"tool_use_id":"ws_b","type":"web_search_tool_result"},{"text":"Go 1.26 is out (release notes).","type":"text"}`}},
	{"web_search_failed",
		[]string{`"content":{"error_code":"unavailable","type":"web_search_tool_result_error"}`, `"name":"Read"`, `"stop_reason":"tool_use"`},
		[]string{`"content":{"error_code":"unavailable","type":"web_search_tool_result_error"}`, `"stop_reason":"tool_use"`}},
}

// TestStreamWebSearchGolden runs the recorded web search streams through a Stream and compares
// the frames with testdata/<name>.golden (-update rewrites them): the server_tool_use block
// (its query as one input_json_delta), then the web_search_tool_result block with the results
// the next message cites, then that message's text, which waited for it; the order of
// blocks and indices is what clients accept (checkFrames).
func TestStreamWebSearchGolden(t *testing.T) {
	for _, tc := range webSearchGolden {
		t.Run(tc.name, func(t *testing.T) { checkSearchOrder(t, streamGolden(t, tc.name, tc.checks)) })
	}
}

// checkSearchOrder checks that each server_tool_use block is followed by its
// web_search_tool_result before any text block opens.
func checkSearchOrder(t *testing.T, sse []byte) {
	t.Helper()
	var pending string
	for _, chunk := range strings.Split(string(sse), "\n\n") {
		_, data, ok := strings.Cut(chunk, "\ndata: ")
		if !ok || !strings.HasPrefix(chunk, "event: content_block_start") {
			continue
		}
		var d struct {
			ContentBlock struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"content_block"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			t.Fatal(err)
		}
		switch cb := d.ContentBlock; cb.Type {
		case "server_tool_use":
			pending = cb.ID
		case "web_search_tool_result":
			if cb.ToolUseID != pending {
				t.Errorf("web_search_tool_result for %q, want it for %q, right after its server_tool_use", cb.ToolUseID, pending)
			}
			pending = ""
		case "text":
			if pending != "" {
				t.Errorf("a text block before the result of search %s", pending)
			}
		}
	}
}

// TestMessageWebSearch: the same recorded streams, collected for a client that did not ask for
// a stream (Collector), and a one-shot response object (Message), give the same blocks in
// output order, and the web search count in usage.
func TestMessageWebSearch(t *testing.T) {
	for _, tc := range webSearchGolden {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.name+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var c Collector
			var completed []byte
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				c.Event(sc.Bytes())
				var e struct {
					Type     string          `json:"type"`
					Response json.RawMessage `json:"response"`
				}
				if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == "response.completed" {
					completed = e.Response
				}
			}
			got := string(c.Message("m", wire.Names{}))
			for _, w := range tc.message {
				if !strings.Contains(got, w) {
					t.Errorf("collected %s\nwant it to contain %s", got, w)
				}
			}
			if !strings.Contains(string(completed), `"output":[]`) {
				one, err := Message(completed, "m", wire.Names{})
				if err != nil {
					t.Fatal(err)
				}
				if string(one) != got {
					t.Errorf("Message of the completed response\n%s\ndiffers from the collected one\n%s", one, got)
				}
			}
		})
	}
}
