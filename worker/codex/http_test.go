package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/internal/origintext"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// collect returns an onEvent that records event types, and the text of the deltas.
func collect(types *[]string, text *strings.Builder) func(Event) error {
	return func(ev Event) error {
		*types = append(*types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			var d struct{ Delta string }
			_ = json.Unmarshal(ev.Data, &d)
			text.WriteString(d.Delta)
		}
		return nil
	}
}

// TestHTTPFallbackOn426: an origin without WebSockets is spoken to over HTTP streaming: one 426,
// then every generation (one-shot and streamed) posts at once, and the events and results are
// those a socket gives.
func TestHTTPFallbackOn426(t *testing.T) {
	srv := newSim(t, codextest.Options{Words: 6})
	c := newClient(t, srv, Config{AccountID: "acct-1"})

	// What a socket gives, for comparison.
	var wsTypes []string
	var wsText strings.Builder
	if _, err := c.Generate(context.Background(), createFrame("same prompt", nil), collect(&wsTypes, &wsText)); err != nil {
		t.Fatal(err)
	}
	c2 := newClient(t, srv, Config{AccountID: "acct-1"})
	srv.Limits.SetWSOff(true)
	for i := range 20 {
		prompt := fmt.Sprintf("prompt %d", i)
		var types []string
		var text strings.Builder
		onEvent := collect(&types, &text)
		if i%2 == 0 {
			onEvent = nil // one-shot: nobody reads the events
		}
		if i == 1 {
			prompt = "same prompt"
		}
		res, err := c2.Generate(context.Background(), createFrame(prompt, nil), onEvent)
		if err != nil {
			t.Fatalf("generation %d: %v", i, err)
		}
		if !res.HTTP {
			t.Errorf("generation %d: Result.HTTP false, want true", i)
		}
		if got, want := outputText(t, res.Response), codextest.Answer(prompt, 6); got != want {
			t.Errorf("generation %d: text %q, want %q", i, got, want)
		}
		if i == 1 {
			if strings.Join(types, ",") != strings.Join(wsTypes, ",") || text.String() != wsText.String() {
				t.Errorf("HTTP events %v %q, want the socket's %v %q", types, text.String(), wsTypes, wsText.String())
			}
		}
	}
	st := srv.Stats()
	if st.Upgrades426 != 1 || st.SSEResponses != 20 {
		t.Errorf("origin saw %d 426s and %d HTTP responses, want 1 and 20", st.Upgrades426, st.SSEResponses)
	}
	cs := c2.Stats()
	if cs.Transport != "http" || cs.HTTPResponses != 20 || cs.HTTPFallbacks != 1 {
		t.Errorf("client stats: transport %q, %d HTTP responses, %d fallbacks; want http, 20, 1", cs.Transport, cs.HTTPResponses, cs.HTTPFallbacks)
	}

	h, body := srv.LastHTTPRequest()
	for k, want := range map[string]string{
		"Authorization": "Bearer " + testToken, "Chatgpt-Account-Id": "acct-1", "Accept": "text/event-stream",
		"Openai-Beta": HTTPBetaHeader, "Content-Type": "application/json", "Originator": Originator,
	} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s: got %q, want %q", k, got, want)
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	if _, ok := m["type"]; ok || string(m["stream"]) != "true" || m["input"] == nil {
		t.Errorf("body %s: want no type, stream true and the input", body)
	}
}

// TestHTTPResumesWebSocket: after WSRetryAfter the client tries a socket again, and stays on it
// once the origin accepts it.
func TestHTTPResumesWebSocket(t *testing.T) {
	srv := newSim(t, codextest.Options{WSOff: true})
	const retry = 300 * time.Millisecond
	c := newClient(t, srv, Config{WSRetryAfter: retry})
	gen := func() *Result {
		t.Helper()
		res, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if !gen().HTTP {
		t.Fatal("first generation was not over HTTP")
	}
	srv.Limits.SetWSOff(false)
	allowed := time.Now()
	for gen().HTTP {
		if time.Since(allowed) > retry+5*time.Second {
			t.Fatalf("still on HTTP %s after the origin allowed WebSockets again", time.Since(allowed))
		}
	}
	took := time.Since(allowed)
	if took > retry+time.Second {
		t.Errorf("back on WebSockets after %s, want within WSRetryAfter (%s) and a little", took, retry)
	}
	if gen().HTTP || c.Stats().Transport != "ws" {
		t.Error("fell back to HTTP although the origin accepts WebSockets")
	}
	t.Logf("WebSockets resumed %s after the origin allowed them (WSRetryAfter %s)", took.Round(time.Millisecond), retry)
}

// TestHTTPErrorStatuses maps refused HTTP streaming requests as refused upgrades are mapped.
func TestHTTPErrorStatuses(t *testing.T) {
	for _, tc := range []struct {
		status, want int
		retryAfter   time.Duration
		code         schemas.Code
	}{
		{401, 401, 0, schemas.CodeUpstreamUnauthorized},
		{403, 403, 0, schemas.CodeOriginForbidden},
		{429, 429, 4 * time.Second, schemas.CodeUpstreamRateLimited},
		{500, 502, 0, schemas.CodeUpstreamError},
		{503, 502, 0, schemas.CodeUpstreamError},
		{426, 502, 0, schemas.CodeUpstreamError},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			srv := newSim(t, codextest.Options{WSOff: true})
			c := newClient(t, srv, Config{})
			if _, err := c.Generate(context.Background(), createFrame("warm", nil), nil); err != nil {
				t.Fatal(err)
			}
			srv.Faults.Reject(1, tc.status, tc.retryAfter)
			res, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
			e := wantError(t, err, tc.want, tc.code)
			if e.RetryAfter != tc.retryAfter {
				t.Errorf("RetryAfter %v, want %v", e.RetryAfter, tc.retryAfter)
			}
			var fb gate.Forbidden
			if errors.As(err, &fb) {
				t.Error("an HTTP refusal must not look like a refused upgrade to the gate")
			}
			if !res.HTTP || res.Response != nil {
				t.Errorf("result %+v, want an HTTP one without a response", res)
			}
		})
	}
}

// TestHTTPStreamFailures: the same faults as on a socket give the same errors.
func TestHTTPStreamFailures(t *testing.T) {
	for _, tc := range []struct {
		fault  string
		status int
		code   schemas.Code
		msg    string
	}{
		{"drop", 502, schemas.CodeUpstreamError, "before a terminal event"},
		{"failed", 502, schemas.CodeUpstreamError, "response failed"},
		{"incomplete", 502, schemas.CodeUpstreamError, "incomplete"},
		{"bad_json", 502, schemas.CodeUpstreamError, "not a JSON object"},
		{"error:429", 429, schemas.CodeUpstreamRateLimited, "origin error"},
		{"stall", 504, schemas.CodeUpstreamTimeout, "no event for"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			srv := newSim(t, codextest.Options{WSOff: true})
			c := newClient(t, srv, Config{IdleTimeout: 300 * time.Millisecond})
			_, err := c.Generate(context.Background(), createFrame("hi", map[string]string{"sim_fault": tc.fault}), nil)
			e := wantError(t, err, tc.status, tc.code)
			if !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %q, want it to contain %q", e.Message, tc.msg)
			}
		})
	}
}

// TestHTTPCancelClosesTheStream: a cancelled context ends an HTTP generation at once and the
// origin sees the client go away.
func TestHTTPCancelClosesTheStream(t *testing.T) {
	srv := newSim(t, codextest.Options{WSOff: true, Latency: 10 * time.Second, Words: 20})
	c := newClient(t, srv, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	var cancelled time.Time
	_, err := c.Generate(ctx, createFrame("long", nil), func(ev Event) error {
		if ev.Type == "response.output_text.delta" && cancelled.IsZero() {
			cancelled = time.Now()
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if d := time.Since(cancelled); d > 100*time.Millisecond {
		t.Errorf("Generate returned %s after the cancel, want at once", d)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := srv.WaitAborts(wctx, 1); err != nil {
		t.Errorf("the origin did not see the client go away: %v", err)
	}
}

// TestHTTPRedaction: an origin that echoes the credentials in its events and error bodies over
// HTTP never gets them to the caller.
func TestHTTPRedaction(t *testing.T) {
	const acct = "acct-SECRET-4242"
	echo := func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			w.WriteHeader(http.StatusUpgradeRequired)
			return
		}
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if body, _ := io.ReadAll(r.Body); strings.Contains(string(body), "fail") {
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"error":{"message":"limit for %s on %s"}}`, tok, acct)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: response.created\ndata: {\"type\":\"response.created\",\"echo\":\"%s %s\"}\n\n", tok, acct)
		fmt.Fprintf(w, "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"output\":[],\"echo\":\"%s\"}}\n\n", tok)
	}
	ts := httptest.NewServer(http.HandlerFunc(echo))
	defer ts.Close()
	c, err := New(Config{URL: ts.URL, Token: testToken, AccountID: acct})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var seen []string
	res, err := c.Generate(context.Background(), createFrame("hi", nil), func(ev Event) error {
		seen = append(seen, string(ev.Data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(seen, string(res.Response)) {
		if strings.Contains(s, testToken) || strings.Contains(s, acct) {
			t.Errorf("event %s leaks a credential", s)
		}
	}
	_, err = c.Generate(context.Background(), createFrame("fail", nil), nil)
	e := wantError(t, err, 429, schemas.CodeUpstreamRateLimited)
	if strings.Contains(e.Message, testToken) || strings.Contains(e.Message, acct) || !strings.Contains(e.Message, origintext.Redacted) {
		t.Errorf("message %q leaks a credential or was not redacted", e.Message)
	}
}

func TestHTTPBody(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"response.create","model":"m","stream":true}`, `{"model":"m","stream":true}`},
		{`{"model":"m","type":"response.create"}`, `{"model":"m"}`},
		{`not json`, `not json`},
	} {
		if got := string(httpBody([]byte(tc.in))); got != tc.want {
			t.Errorf("httpBody(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
