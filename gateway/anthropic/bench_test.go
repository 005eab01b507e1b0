package anthropic

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/gateway/wire"
)

// BenchmarkTranslate: a Claude Code-sized turn (system prompt, tools, a tool round trip).
func BenchmarkTranslate(b *testing.B) {
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"` +
		strings.Repeat("You are Claude Code. ", 500) + `"}],"tools":[` + strings.Repeat(`{"name":"Bash","description":"Run","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}},`, 15) +
		`{"name":"Read","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"list"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.go\nb.go"}]}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Translate(body, Options{SessionID: "s"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream: the parallel tool calls recording through a Stream.
func BenchmarkStream(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("testdata", "parallel_tools.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	for b.Loop() {
		s := NewStream("m", wire.Names{})
		for _, l := range lines {
			s.Event(l)
		}
	}
}
