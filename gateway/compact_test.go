package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/worker/codextest"
)

func compactMsg(role, text string) map[string]any {
	part := "input_text"
	if role == "assistant" {
		part = "output_text"
	}
	return map[string]any{"type": "message", "role": role, "content": []any{map[string]any{"type": part, "text": text}}}
}

// TestCompactEndpoint: POST /v1/responses/compact through the pool (real NATS, a worker, the
// strict simulator) answers the compacted window: the request's user messages and one
// compaction item the origin made from the whole input (its summary names the 4 items and the
// trigger the gateway added); the window, sent back with a new ask to POST /v1/responses, is
// accepted by the origin. Nothing secret is in the replies or the logs.
func TestCompactEndpoint(t *testing.T) {
	p := newPool(t, poolOptions{sim: codextest.Options{Strict: true}})
	input := []any{compactMsg("developer", "You are a coding agent."), compactMsg("user", "first ask"),
		compactMsg("assistant", "first answer"), compactMsg("user", "second ask")}
	body, _ := json.Marshal(map[string]any{"model": "gpt-5.1-codex", "instructions": "Be brief.", "input": input,
		"tools":               []any{map[string]any{"type": "function", "name": "shell", "parameters": map[string]any{"type": "object"}}},
		"parallel_tool_calls": false, "reasoning": nil})
	resp := post(t, p, "/v1/responses/compact", string(body), nil)
	raw := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var got struct {
		Object string           `json:"object"`
		Output []map[string]any `json:"output"`
		Usage  struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("reply %s: %v", raw, err)
	}
	if got.Object != "response.compaction" || len(got.Output) != 3 || got.Usage.OutputTokens == 0 {
		t.Fatalf("reply %s: want object response.compaction, 3 output items and usage", raw)
	}
	for i, want := range []string{"first ask", "second ask"} {
		if o := got.Output[i]; o["role"] != "user" || !strings.Contains(mustMarshal(t, o), want) {
			t.Errorf("output[%d] = %v, want the user message %q", i, o, want)
		}
	}
	item := got.Output[2]
	summary, issued := codextest.CompactionSummary(item["encrypted_content"].(string))
	if item["type"] != "compaction" || !issued || !strings.HasPrefix(summary, "compacted 5 input items (") {
		t.Errorf("output[2] = %v (summary %q, issued %v), want the origin's compaction of the 4 items and the trigger", item, summary, issued)
	}
	if st := p.sim.Stats(); st.Compactions != 1 {
		t.Errorf("simulator compactions %d, want 1", st.Compactions)
	}

	next, _ := json.Marshal(map[string]any{"model": "gpt-5.1-codex", "input": append(asAny(got.Output), compactMsg("user", "third ask"))})
	resp = post(t, p, "/v1/responses", string(next), nil)
	if b := readAll(t, resp.Body); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"status":"completed"`) {
		t.Fatalf("the turn after the compaction: status %d: %s", resp.StatusCode, b)
	}
	if st := p.sim.Stats(); st.CompactedInputs != 1 {
		t.Errorf("simulator saw %d inputs with its compaction item, want 1", st.CompactedInputs)
	}
	if strings.Contains(string(raw), simToken) || strings.Contains(p.logs.String(), simToken) {
		t.Error("the origin's token is in the reply or the gateway's logs")
	}
}

// TestCompactBadBody: a compaction body the endpoint cannot take is answered 400 naming the
// field, and nothing reaches the origin.
func TestCompactBadBody(t *testing.T) {
	p := newPool(t, poolOptions{})
	cases := []struct {
		name, body, param, msg string
	}{
		{"not JSON", `{"input":`, "", "JSON object"},
		{"not an object", `["input"]`, "", "JSON object"},
		{"no input", `{"model":"gpt-5.1-codex"}`, "input", "required"},
		{"null input", `{"input":null}`, "input", "required"},
		{"empty input", `{"input":[]}`, "input", "empty"},
		{"empty string", `{"input":""}`, "input", "empty"},
		{"input a number", `{"input":5}`, "input", "string or an array"},
		{"item not an object", `{"input":["hi"]}`, "input[0]", "object"},
		{"model a number", `{"input":"hi","model":5}`, "model", "string"},
		{"instructions an object", `{"input":"hi","instructions":{}}`, "instructions", "string"},
		{"refused field", `{"input":"hi","temperature":0.2}`, "temperature", "not supported"},
		{"stream", `{"input":"hi","stream":true}`, "stream", "not supported"},
		{"previous_response_id", `{"input":"hi","previous_response_id":"resp_1"}`, "previous_response_id", "not supported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, p, "/v1/responses/compact", tc.body, nil)
			raw := readAll(t, resp.Body)
			msg, _, code, param := openAIError(t, raw)
			if resp.StatusCode != http.StatusBadRequest || code != "invalid_request" {
				t.Fatalf("status %d, code %q, want 400 invalid_request: %s", resp.StatusCode, code, raw)
			}
			if got := deref(param); got != tc.param || !strings.Contains(msg, tc.msg) {
				t.Errorf("param %q, message %q; want param %q and a message with %q", got, msg, tc.param, tc.msg)
			}
		})
	}
	if st := p.sim.Stats(); st.Responses != 0 {
		t.Errorf("the origin started %d responses for refused bodies, want 0", st.Responses)
	}
}

// TestCompactOriginFails: an origin that fails the compaction, or answers it without a
// compaction item, is a 502 to the client, not a window without the compaction.
func TestCompactOriginFails(t *testing.T) {
	p := newPool(t, poolOptions{})
	p.sim.Faults.Next(codextest.AtResponse, 1, codextest.FaultFailed)
	resp := post(t, p, "/v1/responses/compact", `{"input":"hi"}`, nil)
	if raw := readAll(t, resp.Body); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("a failed compaction: status %d, want 502: %s", resp.StatusCode, raw)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func asAny(items []map[string]any) []any {
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
