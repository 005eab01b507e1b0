package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/worker/codextest"
)

// TestTranslatedRoutesDropRefusedFields: the Messages and chat routes drop every field the Codex
// backend refuses, so a strict simulator (which refuses them as the origin does) answers
// requests that set them all; the same field sent on the Responses route is refused by the
// gateway itself, and the origin sees none of them.
func TestTranslatedRoutesDropRefusedFields(t *testing.T) {
	p := newPool(t, poolOptions{sim: codextest.Options{Strict: true}})
	tests := []struct {
		name, path, body string
		status           int
	}{
		{name: "messages", path: "/v1/messages", status: 200,
			body: `{"model":"claude-sonnet-5-5","max_tokens":1024,"temperature":1,"top_p":0.9,"top_k":5,` +
				`"metadata":{"user_id":"u"},"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],` +
				`"messages":[{"role":"user","content":"Say hello"}]}`},
		{name: "messages streamed", path: "/v1/messages", status: 200,
			body: `{"model":"claude-sonnet-5-5","max_tokens":1024,"stream":true,"temperature":1,"metadata":{"user_id":"u"},"messages":[{"role":"user","content":"Say hello"}]}`},
		{name: "chat", path: "/v1/chat/completions", status: 200,
			body: `{"model":"gpt-5.1-codex","temperature":0.2,"top_p":1,"max_tokens":10,"max_completion_tokens":10,"metadata":{"a":"b"},` +
				`"user":"u","n":1,"stop":null,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello"}]}`},
		{name: "responses", path: "/v1/responses", status: 400, body: `{"model":"gpt-5.1-codex","input":"Say hello","temperature":0.2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, p, tt.path, tt.body, nil)
			body := string(readAll(t, resp.Body))
			if resp.StatusCode != tt.status || (tt.status == http.StatusOK && strings.Contains(body, "rror")) {
				t.Errorf("got %d %s, want %d", resp.StatusCode, body, tt.status)
			}
		})
	}
	if n := p.sim.Stats().Unsupported; n != 0 {
		t.Errorf("the strict simulator refused %d requests for an unsupported field, want 0", n)
	}
}
