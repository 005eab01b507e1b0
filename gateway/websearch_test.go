package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/worker/codextest"
)

// webSearchTool is a Responses web_search tool with every option a client may set.
const webSearchTool = `{"type":"web_search","filters":{"allowed_domains":["example.com"]},"user_location":{"type":"approximate","country":"FR","city":"Lyon"},"search_context_size":"low"}`

const searchAsk = "Perform a web search for the query: codexpool pools"

func webSearchBody(stream bool) string {
	s := ""
	if stream {
		s = `"stream":true,`
	}
	return `{` + s + `"model":"gpt-5.1-codex","tools":[` + webSearchTool + `],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + searchAsk + `"}]}]}`
}

// sseData reads the data of every server-sent event of r, in order.
func sseData(t *testing.T, r io.Reader) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			out = append(out, bytes.Clone(d))
		}
	}
	return out
}

// checkSearchEvents checks a Responses event stream carries the origin's search as it played
// it: the web_search_call.* events, the done item with its query, the cited message.
func checkSearchEvents(t *testing.T, evs [][]byte) {
	t.Helper()
	var types []string
	done, cited := false, false
	for _, ev := range evs {
		var e struct {
			Type string `json:"type"`
			Item *struct {
				Type   string `json:"type"`
				Status string `json:"status"`
				Action struct{ Type, Query string }
			} `json:"item"`
		}
		if err := json.Unmarshal(ev, &e); err != nil {
			t.Fatalf("event %s: %v", ev, err)
		}
		if strings.HasPrefix(e.Type, "response.web_search_call.") {
			types = append(types, strings.TrimPrefix(e.Type, "response.web_search_call."))
		}
		if e.Type == "response.output_item.done" && e.Item != nil && e.Item.Type == "web_search_call" {
			done = e.Item.Status == "completed" && e.Item.Action.Type == "search" && e.Item.Action.Query == "codexpool pools"
		}
		if e.Type == "response.output_text.annotation.added" && bytes.Contains(ev, []byte(codextest.SearchResults[0].URL)) {
			cited = true
		}
	}
	if got := strings.Join(types, ","); got != "in_progress,searching,completed" {
		t.Errorf("web_search_call events %s, want in_progress,searching,completed", got)
	}
	if !done || !cited {
		t.Errorf("search done %v, cited %v in %d events; want the completed search for the query and its citations", done, cited, len(evs))
	}
}

// checkToolReached checks the origin saw the web_search tool exactly as the client sent it.
func checkToolReached(t *testing.T, p *pool, want string) {
	t.Helper()
	got := p.sim.WebSearchTools()
	if len(got) == 0 {
		t.Fatal("the origin saw no web_search tool")
	}
	var a, b any
	_ = json.Unmarshal(got[len(got)-1], &a)
	_ = json.Unmarshal([]byte(want), &b)
	if ja, jb := mustMarshal(t, a), mustMarshal(t, b); ja != jb {
		t.Errorf("the origin saw the tool %s, want %s as sent", ja, jb)
	}
}

// TestResponsesWebSearch: POST /v1/responses with the web_search tool reaches the origin with
// the tool as sent (filters, location, context size), and the origin's search comes back as it
// played it: streamed (every web_search_call event, the done item, the cited message) and
// one-shot (the web_search_call item in output).
func TestResponsesWebSearch(t *testing.T) {
	p := newPool(t, poolOptions{})
	t.Run("stream", func(t *testing.T) {
		resp := post(t, p, "/v1/responses", webSearchBody(true), nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("got %d %s", resp.StatusCode, readAll(t, resp.Body))
		}
		checkSearchEvents(t, sseData(t, resp.Body))
		checkToolReached(t, p, webSearchTool)
	})
	t.Run("one-shot", func(t *testing.T) {
		resp := post(t, p, "/v1/responses", webSearchBody(false), nil)
		body := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("got %d %s", resp.StatusCode, body)
		}
		var r struct {
			Output []struct {
				Type    string `json:"type"`
				Action  struct{ Query string }
				Content []struct {
					Annotations []struct{ Type, URL string }
				}
			}
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Output) != 2 || r.Output[0].Type != "web_search_call" || r.Output[0].Action.Query != "codexpool pools" ||
			len(r.Output[1].Content) != 1 || len(r.Output[1].Content[0].Annotations) != len(codextest.SearchResults) {
			t.Errorf("got %s, want the search and the message citing %d results", body, len(codextest.SearchResults))
		}
		checkToolReached(t, p, webSearchTool)
	})
}

// TestNATSWebSearch: the same request as codex.generate over NATS (the Go client, streamed):
// the tool reaches the origin as sent and the search events come back unchanged.
func TestNATSWebSearch(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := client.New(p.nc, client.Options{})
	var evs [][]byte
	reply, err := c.Stream(ctxT(t, waitTimeout), []byte(webSearchBody(true)), nil, func(ev []byte) error {
		evs = append(evs, bytes.Clone(ev))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkSearchEvents(t, evs)
	checkToolReached(t, p, webSearchTool)
	if !strings.Contains(reply.OutputText, codextest.SearchResults[2].Title) {
		t.Errorf("output_text %q, want the cited titles", reply.OutputText)
	}
}

const messagesSearch = `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"` + searchAsk + `"}],` +
	`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":8,"allowed_domains":["example.com"],"user_location":{"type":"approximate","country":"FR"}}]}`

// TestMessagesWebSearch: /v1/messages with the web search server tool: the origin gets the
// Responses web_search tool (allowed domains as its filter, the location), and the answer is
// server_tool_use {query}, web_search_tool_result with every canned result, then the text,
// streamed (server_tool_use's query as its input_json_delta) and not, with the search counted
// in usage.
func TestMessagesWebSearch(t *testing.T) {
	p := newPool(t, poolOptions{})
	want := `{"type":"web_search","filters":{"allowed_domains":["example.com"]},"user_location":{"type":"approximate","country":"FR"}}`
	t.Run("message", func(t *testing.T) {
		resp := post(t, p, "/v1/messages", messagesSearch, map[string]string{"Anthropic-Version": "2023-06-01"})
		body := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("got %d %s", resp.StatusCode, body)
		}
		checkToolReached(t, p, want)
		var m struct {
			StopReason string `json:"stop_reason"`
			Content    []struct {
				Type, ID  string
				ToolUseID string `json:"tool_use_id"`
				Input     struct{ Query string }
				Content   []struct{ Type, Title, URL string }
				Text      string
			}
			Usage struct {
				ServerToolUse struct {
					WebSearchRequests int `json:"web_search_requests"`
				} `json:"server_tool_use"`
			}
		}
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, c := range m.Content {
			kinds = append(kinds, c.Type)
		}
		if got := strings.Join(kinds, ","); got != "thinking,server_tool_use,web_search_tool_result,text" {
			t.Fatalf("blocks %s in %s, want thinking,server_tool_use,web_search_tool_result,text", got, body)
		}
		use, res := m.Content[1], m.Content[2]
		if use.Input.Query != "codexpool pools" || res.ToolUseID != use.ID || len(res.Content) != len(codextest.SearchResults) {
			t.Errorf("got %s, want the query and the results of that search", body)
		}
		for i, r := range codextest.SearchResults {
			if i < len(res.Content) && (res.Content[i].Type != "web_search_result" || res.Content[i].Title != r.Title || res.Content[i].URL != r.URL) {
				t.Errorf("result %d %+v, want %+v", i, res.Content[i], r)
			}
		}
		if m.StopReason != "end_turn" || m.Usage.ServerToolUse.WebSearchRequests != 1 {
			t.Errorf("stop_reason %q, web_search_requests %d; want end_turn and 1", m.StopReason, m.Usage.ServerToolUse.WebSearchRequests)
		}
	})
	t.Run("stream", func(t *testing.T) {
		body := strings.Replace(messagesSearch, `{"model"`, `{"stream":true,"model"`, 1)
		resp := post(t, p, "/v1/messages", body, map[string]string{"Anthropic-Version": "2023-06-01"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("got %d %s", resp.StatusCode, readAll(t, resp.Body))
		}
		var starts []string
		query, usage := "", ""
		for _, d := range sseData(t, resp.Body) {
			var f struct {
				Type         string `json:"type"`
				ContentBlock struct {
					Type string `json:"type"`
				} `json:"content_block"`
				Delta struct {
					Type        string `json:"type"`
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
				Usage json.RawMessage `json:"usage"`
			}
			if err := json.Unmarshal(d, &f); err != nil {
				t.Fatal(err)
			}
			switch {
			case f.Type == "content_block_start":
				starts = append(starts, f.ContentBlock.Type)
			case f.Delta.Type == "input_json_delta":
				query += f.Delta.PartialJSON
			case f.Type == "message_delta":
				usage = string(f.Usage)
			}
		}
		if got := strings.Join(starts, ","); got != "thinking,server_tool_use,web_search_tool_result,text" {
			t.Errorf("blocks %s, want thinking,server_tool_use,web_search_tool_result,text", got)
		}
		if query != `{"query":"codexpool pools"}` || !strings.Contains(usage, `"server_tool_use":{"web_search_requests":1}`) {
			t.Errorf("query %s, usage %s; want the query and one web search", query, usage)
		}
	})
}

// TestAnthropicSDKWebSearch: anthropic-sdk-go, asking with its WebSearchTool20250305Param,
// parses the answer's server_tool_use and web_search_tool_result blocks (as their SDK types,
// created and streamed) and the web search count in usage.
func TestAnthropicSDKWebSearch(t *testing.T) {
	p := newPool(t, poolOptions{})
	c := anthropicClient(p, key)
	params := anthropic.MessageNewParams{
		Model: sdkModel, MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(searchAsk))},
		Tools: []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{
			MaxUses: anthropic.Int(3), AllowedDomains: []string{"example.com"}}}},
	}
	check := func(t *testing.T, m *anthropic.Message) {
		t.Helper()
		var use anthropic.ServerToolUseBlock
		var res anthropic.WebSearchToolResultBlock
		for _, b := range m.Content {
			switch v := b.AsAny().(type) {
			case anthropic.ServerToolUseBlock:
				use = v
			case anthropic.WebSearchToolResultBlock:
				res = v
			}
		}
		if use.Name != "web_search" || use.ID == "" || res.ToolUseID != use.ID {
			t.Fatalf("server_tool_use %s, web_search_tool_result %s; want a web_search and its result", use.RawJSON(), res.RawJSON())
		}
		if q, _ := use.Input.(map[string]any)["query"].(string); q != "codexpool pools" {
			t.Errorf("server_tool_use input %v, want the query", use.Input)
		}
		found := res.Content.AsWebSearchResultBlockArray()
		if len(found) != len(codextest.SearchResults) || found[0].Title != codextest.SearchResults[0].Title || found[0].URL != codextest.SearchResults[0].URL {
			t.Errorf("results %s, want the %d canned ones", res.Content.RawJSON(), len(codextest.SearchResults))
		}
		if m.Usage.ServerToolUse.WebSearchRequests != 1 || m.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("web_search_requests %d, stop %s; want 1 and end_turn", m.Usage.ServerToolUse.WebSearchRequests, m.StopReason)
		}
	}
	t.Run("create", func(t *testing.T) {
		m, err := c.Messages.New(ctxT(t, waitTimeout), params)
		if err != nil {
			t.Fatal(err)
		}
		check(t, m)
	})
	t.Run("history", func(t *testing.T) {
		// The answer's blocks sent back as the SDK makes them (ToParam), and a new question:
		// answered, the search replayed to the origin and not redone.
		m, err := c.Messages.New(ctxT(t, waitTimeout), params)
		if err != nil {
			t.Fatal(err)
		}
		before := p.sim.Stats().WebSearches
		next := params
		next.Messages = append(slices.Clone(params.Messages), m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("Thanks")))
		again, err := c.Messages.New(ctxT(t, waitTimeout), next)
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Content) == 0 || again.Content[len(again.Content)-1].Type != "text" || p.sim.Stats().WebSearches != before {
			t.Errorf("got %s, want a text answer and no new search", again.RawJSON())
		}
	})
	t.Run("stream", func(t *testing.T) {
		check(t, streamMessage(t, c, params))
	})
}
