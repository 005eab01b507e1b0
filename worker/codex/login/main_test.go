package login

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newSim starts a simulator, closed at cleanup once every socket is closed (testutil.NewSim).
func newSim(t testing.TB, opts codextest.Options) *codextest.Server {
	t.Helper()
	return testutil.NewSim(t, opts)
}

// testClient uses a TokenSource as codex.Client does with NoReuse (this package cannot import
// codex): every generation opens a socket with the source's credentials, and a 401 on the
// upgrade is retried once with the credentials Unauthorized gives.
type testClient struct {
	url string
	src TokenSource
}

func newClient(srv *codextest.Server, src TokenSource) *testClient {
	return &testClient{url: srv.URL, src: src}
}

// Generate runs one generation of prompt on a new socket.
func (c *testClient) Generate(ctx context.Context, prompt string) error {
	creds, err := c.src.Credentials()
	if err != nil {
		return err
	}
	for retried := false; ; retried = true {
		err := c.generateOnce(ctx, creds, prompt)
		if !isUnauthorized(err) || retried {
			return err
		}
		next, uerr := c.src.Unauthorized(ctx, creds)
		if uerr != nil {
			if e, ok := schemas.AsError(uerr); ok && e.UpstreamCode != "" {
				return uerr
			}
			return err
		}
		creds = next
	}
}

var errUnauthorized = schemas.Errorf(schemas.CodeUpstreamUnauthorized, "test: origin answered 401")

func isUnauthorized(err error) bool {
	e, ok := schemas.AsError(err)
	return ok && e.Code == schemas.CodeUpstreamUnauthorized
}

func (c *testClient) generateOnce(ctx context.Context, creds Credentials, prompt string) error {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+creds.Token)
	if creds.AccountID != "" {
		h.Set("ChatGPT-Account-Id", creds.AccountID)
	}
	h.Set("OpenAI-Beta", "responses_websockets=2026-02-06")
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, c.url, h)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return errUnauthorized
		}
		return fmt.Errorf("test: dial: %w", err)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, createFrame(prompt)); err != nil {
		return err
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return fmt.Errorf("test: read: %w", err)
		}
		var ev struct{ Type string }
		_ = json.Unmarshal(data, &ev)
		switch ev.Type {
		case "response.completed":
			return nil
		case "error", "response.failed", "response.incomplete":
			return fmt.Errorf("test: %s", data)
		}
	}
}

// createFrame builds a response.create frame for prompt.
func createFrame(prompt string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "response.create", "model": "gpt-test", "instructions": "Be brief.",
		"input": []any{map[string]any{"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": prompt}}}},
		"tools": []any{}, "store": false, "stream": true,
	})
	return b
}

// wantError checks that err is a *schemas.Error with status and code, and returns it.
func wantError(t testing.TB, err error, status int, code schemas.Code) *schemas.Error {
	t.Helper()
	var e *schemas.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %T %v, want a *schemas.Error %d %s", err, err, status, code)
	}
	if e.Status != status || e.Code != code {
		t.Fatalf("got %d %s (%q), want %d %s", e.Status, e.Code, e.Message, status, code)
	}
	return e
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, what, cond)
}
