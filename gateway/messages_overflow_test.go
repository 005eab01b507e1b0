package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/worker/codextest"
)

// TestContextOverflow: an input over the origin's context window, however the origin says so
// (response.failed, or a 400 error event before anything), through the real worker, comes back
// as each API's own overflow error, streamed or not and before any frame: Anthropic's 413
// request_too_large (Claude Code compacts on it), OpenAI's 400 context_length_exceeded on the
// chat and Responses paths (clients trim their history). Never a 5xx, which clients retry.
func TestContextOverflow(t *testing.T) {
	p := newPool(t, poolOptions{})
	type want struct {
		status    int
		typ, code string
		param     string
		anthropic bool
	}
	paths := []struct {
		name, path, body string
		want             want
	}{
		{name: "messages", path: "/v1/messages", body: helloMessage,
			want: want{status: 413, typ: "request_too_large", anthropic: true}},
		{name: "chat", path: "/v1/chat/completions", body: `{"model":"gpt-5.1-codex","messages":[{"role":"user","content":"Say hello"}]}`,
			want: want{status: 400, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages"}},
		{name: "responses", path: "/v1/responses", body: `{"model":"gpt-5.1-codex","input":"Say hello"}`,
			want: want{status: 400, typ: "invalid_request_error", code: "context_length_exceeded", param: "input"}},
	}
	// Anthropic and chat streams hold their first frame until something follows it, so even a
	// response.failed right after response.created is a status there.
	for _, fault := range []codextest.Fault{codextest.FaultContextLength, codextest.FaultContextLengthError} {
		for _, pt := range paths {
			for _, stream := range []bool{false, true} {
				body := pt.body
				if stream {
					body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
				}
				t.Run(string(fault)+"/"+pt.name+"/"+map[bool]string{false: "one-shot", true: "stream"}[stream], func(t *testing.T) {
					p.sim.Faults.Clear()
					p.sim.Faults.Next(codextest.AtResponse, 1, fault)
					resp := post(t, p, pt.path, body, nil)
					raw := readAll(t, resp.Body)
					if pt.name == "responses" && stream && fault == codextest.FaultContextLength {
						// The Responses API's own stream: response.failed with the origin's code
						// (what the Codex CLI reads), then the error event with OpenAI's.
						if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"error":{"code":"context_length_exceeded"`) ||
							!strings.Contains(string(raw), `"type":"invalid_request_error","code":"context_length_exceeded","param":"input"`) {
							t.Errorf("got %d %s, want response.failed and an error event, both context_length_exceeded", resp.StatusCode, raw)
						}
						return
					}
					if resp.StatusCode != pt.want.status {
						t.Fatalf("got %d %s, want %d", resp.StatusCode, raw, pt.want.status)
					}
					var e struct {
						Type  string `json:"type"`
						Error struct {
							Type, Code, Message string
							Param               *string
						} `json:"error"`
					}
					if err := json.Unmarshal(raw, &e); err != nil {
						t.Fatalf("body %s: %v", raw, err)
					}
					got := e.Error
					if pt.want.anthropic != (e.Type == "error") || got.Type != pt.want.typ || got.Code != pt.want.code ||
						(got.Param == nil) != (pt.want.param == "") || (got.Param != nil && *got.Param != pt.want.param) ||
						!strings.Contains(got.Message, "exceeds the context window") {
						t.Errorf("got %s, want %+v with the origin's message", raw, pt.want)
					}
					if resp.Header.Get("Retry-After") != "" {
						t.Errorf("retry-after %q on an overflow: retrying cannot help", resp.Header.Get("Retry-After"))
					}
				})
			}
		}
	}
}
