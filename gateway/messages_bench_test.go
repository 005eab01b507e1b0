package gateway_test

import "testing"

// BenchmarkMessagesOverhead is BenchmarkChatOverhead for the Anthropic Messages translation:
// the same prompt as POST /v1/responses and as POST /v1/messages, medians and their difference
// (messages-overhead-p50-µs). The Messages route also asks the origin for its reasoning
// (include reasoning.encrypted_content), so its answer carries a signed thinking block.
//
//	go test -run XXX -bench MessagesOverhead -benchtime 2000x ./gateway/
func BenchmarkMessagesOverhead(b *testing.B) {
	benchOverhead(b, "messages", "/v1/messages", func(stream string) []byte {
		return []byte(`{"model":"claude-sonnet-5-5","max_tokens":256,"messages":[{"role":"user","content":"Say hello"}],"stream":` + stream + `}`)
	})
}
