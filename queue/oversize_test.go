package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// A response larger than the server's max payload can be neither stored nor sent: the job ends
// with a 502 saying so after one generation, and a request gets the same 502 instead of silence.
func TestOversizedResultIsFinal(t *testing.T) {
	ns := startJetStream(t)
	big := `{"id":"r","output_text":"` + strings.Repeat("x", 2<<20) + `"}`
	gen := &scripted{fn: func(ctx context.Context, r *schemas.Request, _ int, emit func([]byte) error) ([]byte, error) {
		return []byte(big), nil
	}}
	jc := &JobsConfig{AckWait: time.Second, MaxAttempts: 2, FetchWait: 200 * time.Millisecond}
	newService(t, ns, Config{Jobs: openJobs(t, ns, jc)}, gen)
	c := jobClient(t, ns)
	submit(t, c, goodRequest, client.SubmitOptions{ID: "big"})
	_, err := waitResult(t, c, "big")
	if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodeUpstreamError || !strings.Contains(e.Message, "max_payload") {
		t.Errorf("result: %v, want 502 naming max_payload", err)
	}
	if n := gen.count("big"); n != 1 {
		t.Errorf("a response too large to store was generated %d times, want once", n)
	}
	m := request(t, connect(t, ns), DefaultSubject, goodRequest, nil)
	if e := errorOf(t, m); e.Code != schemas.CodeUpstreamError || !strings.Contains(e.Message, "max_payload") {
		t.Errorf("one-shot request: %v, want 502 naming max_payload", e)
	}
}
