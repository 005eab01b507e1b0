package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2EClaudeCodeWebSearch runs Claude Code's own WebSearch tool through a gateway process and
// a worker process to the simulator, in the loopback-only namespace TestE2EClaudeCode needs
// (examples/claude-code/ci.sh). The simulator asks for WebSearch (a tool directive); Claude Code
// runs it as it does against Anthropic: a request of its own with the web_search_20250305
// server tool and the query. The gateway makes that the Responses web_search tool, the
// simulator plays a search, the answer comes back as server_tool_use and web_search_tool_result
// blocks, Claude Code hands the results to the model as WebSearch's tool_result, and the
// simulator's last answer quotes it: the canned results' titles and URLs are in what Claude
// Code prints. The requests are checked on the way (a recording proxy): the server tool sent,
// the origin given web_search, the tool result carrying the canned URLs.
func TestE2EClaudeCodeWebSearch(t *testing.T) {
	claude := os.Getenv(claudeCodeEnv)
	if claude == "" {
		t.Skip(claudeCodeEnv + " is not set: run examples/claude-code/ci.sh (installs Claude Code, runs this in a loopback-only network namespace)")
	}
	if ifs := networkInterfaces(t); len(ifs) != 1 || ifs[0] != "lo" {
		t.Fatalf("network interfaces %v: Claude Code runs only where loopback is all there is (ip netns)", ifs)
	}
	c := newCluster(t, codextest.Options{Words: 8, Strict: true})
	c.startWorker("w1")
	_, base := c.startGateway()
	rec := newRecorder(t, base)
	// WebSearch is one of the tools Claude Code defers behind ToolSearch; loaded up front, the
	// simulator's one directive can call it.
	cc := claudeCode{bin: claude, base: rec.url, home: t.TempDir(), env: []string{"ENABLE_TOOL_SEARCH=false"}}

	ask := `Look it up. [sim:tool name=WebSearch args={"query":"codexpool pools"}]`
	out := cc.run(t, t.TempDir(), ask, "--allowedTools", "WebSearch")

	search := rec.lastWith(t, "/v1/messages?", `"web_search_20250305"`)
	var req struct {
		Tools []struct{ Type, Name string }
	}
	if err := json.Unmarshal(search, &req); err != nil {
		t.Fatal(err)
	}
	if len(req.Tools) != 1 || req.Tools[0].Name != "web_search" || !bytes.Contains(search, []byte("Perform a web search for the query: codexpool pools")) {
		t.Errorf("Claude Code's search request %s: want the web_search server tool alone and the query", search)
	}
	if tools := c.sim.WebSearchTools(); len(tools) == 0 || !bytes.Contains(tools[0], []byte(`"type":"web_search"`)) {
		t.Errorf("the origin saw web search tools %s, want web_search", tools)
	}
	if n := c.sim.Stats().WebSearches; n < 1 {
		t.Errorf("the simulator played %d searches, want 1", n)
	}
	result := rec.lastWith(t, "/v1/messages?", `"tool_result"`)
	for _, r := range codextest.SearchResults {
		if !bytes.Contains(result, []byte(r.URL)) {
			t.Errorf("WebSearch's tool_result lacks %s", r.URL)
		}
	}
	first := codextest.SearchResults[0]
	if !strings.Contains(out, "Tool WebSearch returned:") || (!strings.Contains(out, first.URL) && !strings.Contains(out, first.Title)) {
		t.Errorf("claude printed %q, want the answer quoting WebSearch's results (%s)", out, first.URL)
	}
	rec.check(t, "/v1/messages")
}
