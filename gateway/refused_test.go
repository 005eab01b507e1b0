package gateway_test

import (
	"strings"
	"testing"
)

// TestResponsesRefusedFields: a Responses request setting a field the Codex backend refuses is
// answered 400 naming it, and nothing reaches the pool; null counts as absent.
func TestResponsesRefusedFields(t *testing.T) {
	p := newPool(t, poolOptions{})
	tests := []struct {
		name, body string
		status     int
		param      string
	}{
		{name: "temperature", body: `{"input":"hi","temperature":0.2}`, status: 400, param: "temperature"},
		{name: "top_p", body: `{"input":"hi","top_p":0.9}`, status: 400, param: "top_p"},
		{name: "stream_options", body: `{"input":"hi","stream":true,"stream_options":{"include_obfuscation":false}}`, status: 400, param: "stream_options"},
		{name: "safety_identifier", body: `{"input":"hi","safety_identifier":"u1"}`, status: 400, param: "safety_identifier"},
		{name: "prompt_cache_retention", body: `{"input":"hi","prompt_cache_retention":"24h"}`, status: 400, param: "prompt_cache_retention"},
		{name: "null is absent", body: `{"input":"hi","temperature":null}`, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := p.sim.Stats().Responses
			resp := post(t, p, "/v1/responses", tt.body, nil)
			body := readAll(t, resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tt.status)
			}
			if tt.status != 400 {
				return
			}
			msg, typ, code, param := openAIError(t, body)
			if typ != "invalid_request_error" || code != "invalid_request" || param == nil || *param != tt.param || !strings.Contains(msg, tt.param) {
				t.Errorf("got %s %s param %v %q, want invalid_request_error invalid_request naming %s", typ, code, param, msg, tt.param)
			}
			if d := p.sim.Stats().Responses - before; d != 0 {
				t.Errorf("%d generations at the origin, want 0", d)
			}
		})
	}
}
