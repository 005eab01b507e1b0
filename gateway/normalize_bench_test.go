package gateway

import (
	"strings"
	"testing"
)

// A Codex CLI request is ~40 KB: long instructions, a tool list, the conversation. normalize
// scans it once; nothing is decoded.
var benchBody = []byte(`{"model":"gpt-5.1-codex","instructions":"` + strings.Repeat("You are Codex. ", 2000) +
	`","input":[` + strings.Repeat(`{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the \"bug\" in main.go"}]},`, 100) +
	`{"type":"message","role":"user","content":"go"}],"tools":[{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}}],` +
	`"previous_response_id":null,"background":false,"stream":true,"store":false}`)

func BenchmarkNormalize(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchBody)))
	for b.Loop() {
		if r, _ := normalize(benchBody); !r.stream {
			b.Fatal("stream not seen")
		}
	}
}

func BenchmarkInspectEvent(b *testing.B) {
	ev := []byte(`{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","status":"completed","error":null,"output":[{"type":"message","content":[{"type":"output_text","text":"` + strings.Repeat("word ", 200) + `"}]}]},"error":null}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, isErr := inspectEvent(ev); isErr {
			b.Fatal("error event")
		}
	}
}
