package codex

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testToken = "sk-test-SECRET-token-1234567890"

// newSim starts a simulator, closed at cleanup once every socket is closed (testutil.NewSim).
func newSim(t testing.TB, opts codextest.Options) *codextest.Server {
	t.Helper()
	return testutil.NewSim(t, opts)
}

// newClient returns a Client for srv, closed at cleanup (before the simulator is checked).
func newClient(t testing.TB, srv *codextest.Server, cfg Config) *Client {
	t.Helper()
	cfg.URL = srv.URL
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if st := c.Stats(); st.Open != 0 || st.Idle != 0 {
			t.Errorf("after Close: open %d, idle %d; want 0, 0", st.Open, st.Idle)
		}
	})
	return c
}

// createFrame builds a response.create frame for prompt with the given metadata.
func createFrame(prompt string, md map[string]string) []byte {
	req := map[string]any{
		"type": "response.create", "model": "gpt-test", "instructions": "Be brief.",
		"input": []any{map[string]any{"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": prompt}}}},
		"tools": []any{}, "store": false, "stream": true,
	}
	if md != nil {
		req["metadata"] = md
	}
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

// outputText returns the text of the first output_text part of a response object.
func outputText(t testing.TB, resp json.RawMessage) string {
	t.Helper()
	var r struct {
		Output []struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatalf("response is not JSON: %v", err)
	}
	var s string
	for _, o := range r.Output {
		for _, c := range o.Content {
			if c.Type == "output_text" {
				s += c.Text
			}
		}
	}
	return s
}

// wantError checks that err is a *schemas.Error with status and code, and returns it.
func wantError(t testing.TB, err error, status int, code schemas.Code) *schemas.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %d %s", status, code)
	}
	e, ok := schemas.AsError(err)
	if !ok {
		t.Fatalf("got %T %v, want a *schemas.Error", err, err)
	}
	if e.Status != status || e.Code != code {
		t.Fatalf("got %d %s (%q), want %d %s", e.Status, e.Code, e.Message, status, code)
	}
	return e
}

// waitFor polls cond until it holds or 5 s pass: for state that changes on another goroutine
// after a socket event, where there is nothing to block on.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, what, cond)
}

var errStop = errors.New("test: stop")
