package schemas

import (
	"encoding/json"
	"testing"
)

func TestPromptCacheKey(t *testing.T) {
	tests := []struct {
		name, payload, want string
	}{
		{"set", `{"input":"x","prompt_cache_key":"conv-1"}`, "conv-1"},
		{"absent", `{"input":"x"}`, ""},
		{"not a string", `{"input":"x","prompt_cache_key":7}`, ""},
		{"null", `{"input":"x","prompt_cache_key":null}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.payload), &fields); err != nil {
				t.Fatal(err)
			}
			if got := NewRequest(fields).PromptCacheKey(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	var nilReq *Request
	if got := nilReq.PromptCacheKey(); got != "" {
		t.Errorf("nil request: got %q, want \"\"", got)
	}
}
