package schemas

import "testing"

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
