package codextest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestStrictRefusesWhatTheOriginRefuses(t *testing.T) {
	tests := []struct {
		name      string
		strict    bool
		extra     map[string]any
		wantParam string // "" = answered
	}{
		{name: "lenient ignores metadata", extra: map[string]any{"metadata": map[string]string{"a": "b"}}},
		{name: "lenient ignores unknown", extra: map[string]any{"temperature": 0.2}},
		{name: "strict accepts what the Codex CLI sends", strict: true,
			extra: map[string]any{"prompt_cache_key": "k", "reasoning": map[string]any{"effort": "low"}, "parallel_tool_calls": true,
				"include": []string{}, "tool_choice": "auto", "text": map[string]any{}, "client_metadata": map[string]any{}}},
		{name: "strict refuses metadata", strict: true, extra: map[string]any{"metadata": map[string]string{"a": "b"}}, wantParam: "metadata"},
		{name: "strict refuses temperature", strict: true, extra: map[string]any{"temperature": 0.2}, wantParam: "temperature"},
		{name: "strict names the first in name order", strict: true, extra: map[string]any{"top_p": 1, "max_output_tokens": 9}, wantParam: "max_output_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, Options{Words: 3, Strict: tt.strict})
			c := mustDial(t, s)
			evs := readResponseOf(t, c, toolFrame([]any{userMsg("Say hello")}, nil, tt.extra))
			last := evs[len(evs)-1]
			if tt.wantParam == "" {
				if last.typ() != evCompleted || textOf(evs) != Answer(PromptOf(toolFrame([]any{userMsg("Say hello")}, nil, nil)), 3) {
					t.Fatalf("last event %s, want a completed answer", last.raw)
				}
				return
			}
			if last.typ() != "error" || last.get("status") != float64(400) || last.get("error.code") != "unsupported_parameter" ||
				last.get("error.param") != tt.wantParam || last.get("error.message") != "Unsupported parameter: "+tt.wantParam {
				t.Fatalf("got %s, want a 400 unsupported_parameter error naming %s", last.raw, tt.wantParam)
			}
			st := s.Stats()
			if st.Unsupported != 1 || st.Responses != 0 {
				t.Errorf("stats unsupported %d responses %d, want 1 and 0 (a refused request is not started)", st.Unsupported, st.Responses)
			}
			// The socket stays usable, as the origin's does after a refused frame.
			if evs := readResponseOf(t, c, toolFrame([]any{userMsg("Say hello")}, nil, nil)); evs[len(evs)-1].typ() != evCompleted {
				t.Errorf("after the refusal: %s, want a completed answer", evs[len(evs)-1].raw)
			}
		})
	}
}

func TestStrictOverHTTP(t *testing.T) {
	s := newServer(t, Options{Words: 3, Strict: true})
	var body map[string]any
	_ = json.Unmarshal(streamBody("Say hello", map[string]string{"sim_words": "2"}), &body)
	b, _ := json.Marshal(body)
	resp := post(context.Background(), t, httpClient(t), s.HTTPURL, nil, b)
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "Unsupported parameter: metadata") {
		t.Fatalf("status %d body %s, want 400 naming metadata", resp.StatusCode, raw)
	}
	if st := s.Stats(); st.Unsupported != 1 || st.Responses != 0 {
		t.Errorf("stats unsupported %d responses %d, want 1 and 0", st.Unsupported, st.Responses)
	}
}
