package schemas

import (
	"strings"
	"testing"
)

var benchRequest = []byte(`{"model":"gpt-5.1-codex","instructions":"Be brief.","input":"Say hello","stream":false,"metadata":{"user":"u1"},"max_output_tokens":256}`)

func BenchmarkParseRequestUpstream(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchRequest)))
	for b.Loop() {
		r, err := ParseRequest(benchRequest)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Upstream("gpt-5.1-codex"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseRequest1MB(b *testing.B) {
	payload := []byte(`{"input":"` + strings.Repeat("word ", 1<<18) + `"}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := ParseRequest(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseRequestDeepRefused(b *testing.B) {
	payload := []byte(`{"input":"x","deep":` + nested("[", 10000, "") + `}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(payload); err == nil {
			b.Fatal("accepted")
		}
	}
}

var benchResponse = []byte(`{"id":"resp_1","object":"response","created_at":1738888888,"status":"completed","model":"gpt-5.1-codex",` +
	`"output":[{"id":"rs_1","type":"reasoning","summary":[]},{"id":"msg_1","type":"message","role":"assistant","status":"completed",` +
	`"content":[{"type":"output_text","text":"Hello there! How can I help you today?","annotations":[]}]}],` +
	`"usage":{"input_tokens":42,"output_tokens":5,"total_tokens":47}}`)

func BenchmarkWithOutputText(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchResponse)))
	for b.Loop() {
		if _, err := WithOutputText(benchResponse); err != nil {
			b.Fatal(err)
		}
	}
}
