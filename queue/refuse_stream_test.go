package queue

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
)

// TestRefusedStreamEndsWithSentinel: a refused streaming request gets its error message and then
// the empty sentinel, so `nats request --wait-for-empty` and nats.js requestMany({strategy:
// "sentinel"}) return at once; a refused one-shot request gets the error alone.
func TestRefusedStreamEndsWithSentinel(t *testing.T) {
	ns := startServer(t)
	newService(t, ns, Config{MaxRequestBytes: 200}, instant)
	nc := connect(t, ns)
	big := `{"stream":true,"input":"` + strings.Repeat("a", 300) + `"}`
	tests := []struct {
		name, payload string
		hdr           nats.Header
		code          schemas.Code
		sentinel      bool
	}{
		{"invalid input, streaming", `{"input":42,"stream":true}`, nil, schemas.CodeInvalidRequest, true},
		{"bad Codex-Timeout, streaming", `{"input":"x","stream":true}`, nats.Header{schemas.HeaderTimeout: {"soon"}}, schemas.CodeInvalidRequest, true},
		{"too large, streaming", big, nil, schemas.CodeRequestTooLarge, true},
		{"invalid input, one-shot", `{"input":42}`, nil, schemas.CodeInvalidRequest, false},
		{"stream not a bool", `{"input":"x","stream":"yes"}`, nil, schemas.CodeInvalidRequest, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inbox := nats.NewInbox()
			sub, err := nc.SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if err := nc.PublishMsg(&nats.Msg{Subject: DefaultSubject, Reply: inbox, Data: []byte(tc.payload), Header: tc.hdr}); err != nil {
				t.Fatal(err)
			}
			m, err := sub.NextMsg(waitTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if e := errorOf(t, m); e.Code != tc.code {
				t.Errorf("code = %s, want %s", e.Code, tc.code)
			}
			// A follow-up request answered on the same inbox: the service handles messages in order
			// and publishes on one connection, so its reply comes after any sentinel.
			if err := nc.PublishMsg(&nats.Msg{Subject: DefaultSubject, Reply: inbox, Data: []byte(goodRequest)}); err != nil {
				t.Fatal(err)
			}
			next, err := sub.NextMsg(waitTimeout)
			if err != nil {
				t.Fatal(err)
			}
			gotSentinel := len(next.Data) == 0 && len(next.Header) == 0
			if gotSentinel != tc.sentinel {
				t.Errorf("message after the error = %q (headers %v); want sentinel: %t", next.Data, next.Header, tc.sentinel)
			}
		})
	}
}
