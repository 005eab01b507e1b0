package validate

import (
	"strings"
	"testing"
)

var benchRequest = []byte(`{"model":"gpt-5.1-codex","instructions":"Be brief.","input":"Say hello","stream":false,"metadata":{"user":"u1"},"max_output_tokens":256}`)

func BenchmarkParseRequestUpstream(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchRequest)))
	for b.Loop() {
		r, err := Request(benchRequest)
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
		if _, err := Request(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseRequestDeepRefused(b *testing.B) {
	payload := []byte(`{"input":"x","deep":` + nested("[", 10000, "") + `}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Request(payload); err == nil {
			b.Fatal("accepted")
		}
	}
}
