package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// What real clients send, end to end through each route to the simulator and back: structured
// outputs, images and refused stop sequences.

// postRoute posts body to path with the test key and returns the status and the decoded reply.
func postRoute(t *testing.T, p *pool, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodPost, p.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: reply %q is not a JSON object", path, b)
	}
	return resp.StatusCode, out
}

// dig follows keys and indexes (as ints) into a decoded JSON value.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

const personSchema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":1}},"required":["name","age"],"additionalProperties":false}`

func TestStructuredOutputsEveryRoute(t *testing.T) {
	p := newPool(t, poolOptions{})
	routes := []struct {
		name, path, body string
		text             func(map[string]any) any
	}{
		{"responses text.format", "/v1/responses",
			`{"model":"gpt-5.1-codex","input":"A person","text":{"format":{"type":"json_schema","name":"person","strict":true,"schema":` + personSchema + `}}}`,
			func(r map[string]any) any { return dig(r, "output", 0, "content", 0, "text") }},
		{"chat response_format", "/v1/chat/completions",
			`{"model":"gpt-5.1-codex","messages":[{"role":"user","content":"A person"}],"response_format":{"type":"json_schema","json_schema":{"name":"person","strict":true,"schema":` + personSchema + `}}}`,
			func(r map[string]any) any { return dig(r, "choices", 0, "message", "content") }},
		{"messages output_config.format", "/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"A person"}],"output_config":{"format":{"type":"json_schema","schema":` + personSchema + `}}}`,
			func(r map[string]any) any { return textBlock(r) }},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			status, reply := postRoute(t, p, rt.path, rt.body)
			text, _ := rt.text(reply).(string)
			var person struct {
				Name string `json:"name"`
				Age  int    `json:"age"`
			}
			dec := json.NewDecoder(strings.NewReader(text))
			dec.DisallowUnknownFields()
			if status != http.StatusOK || dec.Decode(&person) != nil || person.Name == "" || person.Age < 1 {
				t.Fatalf("status %d, answer %q: want 200 and an instance of the schema (reply %v)", status, text, reply)
			}
		})
	}
}

func TestImagesEveryRoute(t *testing.T) {
	p := newPool(t, poolOptions{})
	const png = "data:image/png;base64,iVBORw0KGgo="
	bodies := []struct{ path, body string }{
		{"/v1/responses", `{"model":"gpt-5.1-codex","input":[{"role":"user","content":[{"type":"input_image","image_url":"` + png + `"},{"type":"input_text","text":"what?"}]}]}`},
		{"/v1/chat/completions", `{"model":"gpt-5.1-codex","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + png + `"}},{"type":"text","text":"what?"}]}]}`},
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"what?"}]}]}`},
	}
	for i, b := range bodies {
		if status, reply := postRoute(t, p, b.path, b.body); status != http.StatusOK {
			t.Fatalf("%s: status %d, reply %v", b.path, status, reply)
		}
		if got := p.sim.Stats().Images; got != int64(i+1) {
			t.Fatalf("after %s the origin saw %d images, want %d", b.path, got, i+1)
		}
	}
}

func TestStopSequencesRefused(t *testing.T) {
	p := newPool(t, poolOptions{})
	status, reply := postRoute(t, p, "/v1/chat/completions", `{"model":"gpt-5.1-codex","stop":["END"],"messages":[{"role":"user","content":"x"}]}`)
	if status != http.StatusBadRequest || dig(reply, "error", "param") != "stop" {
		t.Errorf("chat with stop: status %d, reply %v; want 400 naming param stop", status, reply)
	}
	status, reply = postRoute(t, p, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"stop_sequences":["END"],"messages":[{"role":"user","content":"x"}]}`)
	msg, _ := dig(reply, "error", "message").(string)
	if status != http.StatusBadRequest || dig(reply, "error", "type") != "invalid_request_error" || !strings.HasPrefix(msg, "stop_sequences") {
		t.Errorf("messages with stop_sequences: status %d, reply %v; want 400 invalid_request_error naming stop_sequences", status, reply)
	}
	if got := p.sim.Stats().Responses; got != 0 {
		t.Errorf("%d responses reached the origin, want 0", got)
	}
}

// textBlock is the text of an Anthropic message's first text block.
func textBlock(msg map[string]any) any {
	blocks, _ := msg["content"].([]any)
	for _, b := range blocks {
		if dig(b, "type") == "text" {
			return dig(b, "text")
		}
	}
	return nil
}
