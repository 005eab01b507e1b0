package codextest

import (
	"strings"
	"testing"
)

func TestAnswerDeterministic(t *testing.T) {
	a := Answer("Say hello", 8)
	if b := Answer("Say hello", 8); a != b {
		t.Fatalf("Answer differs between calls: %q vs %q", a, b)
	}
	if !strings.HasPrefix(a, AnswerPrefix) {
		t.Errorf("Answer %q does not start with %q: it must say it is the simulator", a, AnswerPrefix)
	}
	words := strings.TrimPrefix(a, AnswerPrefix)
	if n := len(strings.Fields(words)); n != 8 {
		t.Errorf("Answer has %d words after the prefix, want 8: %q", n, a)
	}
	if strings.Join(strings.Fields(words), " ") != words {
		t.Errorf("Answer %q is not words joined by single spaces", a)
	}
	if got := Answer("Say hello", 3); !strings.HasPrefix(a, got) {
		t.Errorf("Answer(p, 3) = %q is not a prefix of Answer(p, 8) = %q", got, a)
	}
	if Answer("Say hello!", 8) == a {
		t.Error("different prompts give the same answer")
	}
	if got := Answer("x", 0); got != "" {
		t.Errorf("Answer(x, 0) = %q, want empty", got)
	}
	// Words vary within one answer (not one word repeated), and across prompts.
	seen := map[string]bool{}
	for i := range 50 {
		for _, w := range strings.Fields(strings.TrimPrefix(Answer(strings.Repeat("p", i), 8), AnswerPrefix)) {
			seen[w] = true
		}
	}
	if len(seen) < len(vocabulary)/2 {
		t.Errorf("50 answers used %d distinct words of %d", len(seen), len(vocabulary))
	}
	// Pinned, so an accidental change of vocabulary or hashing shows up here.
	if got, want := Answer("Say hello", 4), "[codexpool sim] romeo river uniform zephyr"; got != want {
		t.Errorf("Answer(Say hello, 4) = %q, want %q", got, want)
	}
}

func TestPromptOf(t *testing.T) {
	tests := []struct {
		name, frame, want string
	}{
		{"string input", `{"type":"response.create","input":"Say hello"}`, "Say hello"},
		{"message with input_text parts", `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"x"},{"type":"input_text","text":"b"}]}]}`, "ab"},
		{"several messages", `{"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"one "}]},{"role":"user","content":"two"}]}`, "one two"},
		{"non-message items skipped", `{"input":[{"type":"function_call_output","call_id":"c","output":"zzz"},{"type":"message","role":"user","content":[{"type":"input_text","text":"q"}]}]}`, "q"},
		{"no input", `{"type":"response.create"}`, ""},
		{"not JSON", `nope`, ""},
		{"input of wrong type", `{"input":42}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PromptOf([]byte(tt.frame)); got != tt.want {
				t.Errorf("PromptOf = %q, want %q", got, tt.want)
			}
		})
	}
	if got := PromptOf(createFrame("from helper", nil)); got != "from helper" {
		t.Errorf("PromptOf(Codex-style frame) = %q, want %q", got, "from helper")
	}
}
