package codex

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/internal/origintext"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestEventOutcomes maps every failure the origin can send after the upgrade to its contract error,
// and checks that the socket is dropped and that onEvent saw the terminal failure event.
func TestEventOutcomes(t *testing.T) {
	for _, tc := range []struct {
		fault        string
		status       int
		code         schemas.Code
		upstreamCode string
		message      string // substring of the message
		lastEvent    string // the last event onEvent saw; "" = none required
		retryAfter   [2]time.Duration
	}{
		{fault: "failed", status: 502, code: schemas.CodeUpstreamError, upstreamCode: "server_error", message: "response failed", lastEvent: "response.failed"},
		{fault: "incomplete", status: 502, code: schemas.CodeUpstreamError, upstreamCode: "max_output_tokens", message: "max_output_tokens", lastEvent: "response.incomplete"},
		{fault: "bad_json", status: 502, code: schemas.CodeUpstreamError, message: "not a JSON object", lastEvent: "response.created"},
		{fault: "binary", status: 502, code: schemas.CodeUpstreamError, message: "binary", lastEvent: "response.created"},
		{fault: "drop", status: 502, code: schemas.CodeUpstreamError, message: "before a terminal event", lastEvent: "response.created"},
		{fault: "close1008", status: 502, code: schemas.CodeUpstreamError, message: "1008"},
		{fault: "error", status: 500, code: schemas.CodeUpstreamError, upstreamCode: "server_error", message: "simulated", lastEvent: "error"},
		{fault: "error:401", status: 401, code: schemas.CodeUpstreamUnauthorized, upstreamCode: "invalid_request", lastEvent: "error"},
		{fault: "error:429", status: 429, code: schemas.CodeUpstreamRateLimited, upstreamCode: "usage_limit_reached", lastEvent: "error",
			retryAfter: [2]time.Duration{55 * time.Second, 61 * time.Second}},
		{fault: "error_nostatus", status: 502, code: schemas.CodeUpstreamError, upstreamCode: "server_error", lastEvent: "error"},
		// On a fresh socket the connection-limit event is an ordinary error event with its status.
		{fault: "conn_limit", status: 400, code: schemas.CodeUpstreamError, upstreamCode: "websocket_connection_limit_reached", lastEvent: "error"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			srv := newSim(t, codextest.Options{})
			c := newClient(t, srv, Config{})
			var last string
			_, err := c.Generate(context.Background(), createFrame("hi", map[string]string{"sim_fault": tc.fault}),
				func(ev Event) error { last = ev.Type; return nil })
			e := wantError(t, err, tc.status, tc.code)
			if e.UpstreamCode != tc.upstreamCode {
				t.Errorf("UpstreamCode %q, want %q", e.UpstreamCode, tc.upstreamCode)
			}
			if !strings.Contains(e.Message, tc.message) || !strings.HasPrefix(e.Message, "codex: ") {
				t.Errorf("message %q: want a codex: message containing %q", e.Message, tc.message)
			}
			if tc.lastEvent != "" && last != tc.lastEvent {
				t.Errorf("last event seen %q, want %q", last, tc.lastEvent)
			}
			if e.RetryAfter < tc.retryAfter[0] || (tc.retryAfter[1] > 0 && e.RetryAfter > tc.retryAfter[1]) {
				t.Errorf("RetryAfter %v, want within %v", e.RetryAfter, tc.retryAfter)
			}
			if st := c.Stats(); st.Open != 0 || st.Idle != 0 {
				t.Errorf("open %d idle %d: the socket must be closed after a failure", st.Open, st.Idle)
			}
		})
	}
}

// TestHandshakeOutcomes maps refused upgrades (from the HTTP status) to contract errors.
func TestHandshakeOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter time.Duration
		wantStatus int
		code       schemas.Code
		message    string
		wantRA     time.Duration
	}{
		{name: "401", status: 401, wantStatus: 401, code: schemas.CodeUpstreamUnauthorized, message: "authentication token is invalid"},
		{name: "429 with Retry-After", status: 429, retryAfter: 7 * time.Second, wantStatus: 429, code: schemas.CodeUpstreamRateLimited, message: "Rate limit", wantRA: 7 * time.Second},
		{name: "500", status: 500, wantStatus: 502, code: schemas.CodeUpstreamError, message: "HTTP 500"},
		{name: "503", status: 503, wantStatus: 502, code: schemas.CodeUpstreamError, message: "HTTP 503"},
		{name: "404", status: 404, wantStatus: 502, code: schemas.CodeUpstreamError, message: "HTTP 404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newSim(t, codextest.Options{})
			c := newClient(t, srv, Config{})
			srv.Faults.Reject(1, tc.status, tc.retryAfter)
			res, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
			// The Result still tells what happened: one upgrade attempt, no response.
			if res == nil || res.Attempts != 1 || res.Response != nil || res.Reused {
				t.Errorf("result with the error = %+v, want one attempt and no response", res)
			}
			e := wantError(t, err, tc.wantStatus, tc.code)
			if !strings.Contains(e.Message, tc.message) {
				t.Errorf("message %q does not contain %q", e.Message, tc.message)
			}
			if e.RetryAfter != tc.wantRA {
				t.Errorf("RetryAfter %v, want %v", e.RetryAfter, tc.wantRA)
			}
			var fb gate.Forbidden
			if errors.As(err, &fb) {
				t.Errorf("a %d must not look like an origin 403 to the gate", tc.status)
			}
			if got := srv.Stats().UpgradesRejected; got != 1 {
				t.Errorf("%d upgrades rejected, want 1 (no retry)", got)
			}
		})
	}
}

// TestForbiddenRetriedAfterCooldown: one 403 is reported to the gate and retried once after the
// cooldown; the generation succeeds.
func TestForbiddenRetriedAfterCooldown(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	g := gate.New(gate.Config{Widen: 10 * time.Millisecond, Max: 50 * time.Millisecond})
	c := newClient(t, srv, Config{Gate: g, Policy: gate.Policy{ForbiddenCooldown: 30 * time.Millisecond}})
	srv.Faults.Reject(1, 403, 0)
	res, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if res.Attempts != 2 || res.GateWait < 30*time.Millisecond {
		t.Errorf("Attempts %d GateWait %v: want 2 attempts and at least the 30ms cooldown", res.Attempts, res.GateWait)
	}
	if st := srv.Stats(); st.Rejected403 != 1 || st.UpgradesAccepted != 1 {
		t.Errorf("simulator: %d 403s, %d accepted; want 1, 1", st.Rejected403, st.UpgradesAccepted)
	}
	if snap := g.Snapshot(); snap.Rejections != 1 {
		t.Errorf("gate saw %d rejections, want 1", snap.Rejections)
	}
	if st := c.Stats(); st.Forbidden != 1 || st.Dials != 2 || st.Upgrades != 1 {
		t.Errorf("client stats %+v: want 1 forbidden, 2 dials, 1 upgrade", st)
	}
}

// TestForbiddenTwiceReturnsOriginForbidden: a 403 on the retry too is returned as origin_forbidden
// with the origin's Retry-After, and as a gate.Forbidden.
func TestForbiddenTwiceReturnsOriginForbidden(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{Policy: gate.Policy{ForbiddenCooldown: time.Millisecond}})
	srv.Faults.Reject(2, 403, time.Second) // Retry-After 1 s: the cooldown becomes 1 s
	_, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
	e := wantError(t, err, 403, schemas.CodeOriginForbidden)
	if e.RetryAfter != time.Second {
		t.Errorf("RetryAfter %v, want 1s", e.RetryAfter)
	}
	var fb gate.Forbidden
	if !errors.As(err, &fb) || fb.OriginForbidden() != time.Second {
		t.Errorf("error %v is not a gate.Forbidden with Retry-After 1s", err)
	}
	if !strings.Contains(e.Message, "Forbidden (simulated)") {
		t.Errorf("message %q lacks the origin's message", e.Message)
	}
	if st := srv.Stats(); st.Rejected403 != 2 || st.UpgradesAccepted != 0 {
		t.Errorf("simulator: %d 403s, %d accepted; want 2, 0", st.Rejected403, st.UpgradesAccepted)
	}
}

// TestForbiddenStormThroughRateLimit: an origin that accepts 2 upgrades per burst sees 6
// concurrent generations; the gate and the retry get every one through.
func TestForbiddenStormThroughRateLimit(t *testing.T) {
	srv := newSim(t, codextest.Options{UpgradeRate: 50, UpgradeBurst: 2})
	g := gate.New(gate.Config{Widen: 25 * time.Millisecond, Max: 100 * time.Millisecond})
	c := newClient(t, srv, Config{NoReuse: true, Gate: g, Policy: gate.Policy{ForbiddenCooldown: 60 * time.Millisecond}})
	const n = 6
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
			errs <- err
		}()
	}
	failed := 0
	for range n {
		if err := <-errs; err != nil {
			failed++
			t.Logf("generation failed: %v", err)
		}
	}
	st := srv.Stats()
	t.Logf("simulator: %d accepted, %d 403s; gate %+v", st.UpgradesAccepted, st.Rejected403, g.Snapshot())
	if failed != 0 {
		t.Errorf("%d of %d generations failed", failed, n)
	}
	if st.Rejected403 == 0 {
		t.Errorf("no 403 happened: the test did not exercise the storm")
	}
}

func TestConnectTimeout(t *testing.T) {
	srv := newSim(t, codextest.Options{})
	c := newClient(t, srv, Config{Policy: gate.Policy{ConnectTimeout: 50 * time.Millisecond}})
	srv.Faults.Next(codextest.AtUpgrade, 1, codextest.FaultHangUpgrade)
	_, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
	wantError(t, err, 504, schemas.CodeUpstreamTimeout)
	srv.CloseClientConnections()
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c, err := New(Config{URL: "http://" + addr + "/responses", Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Generate(context.Background(), createFrame("hi", nil), nil)
	e := wantError(t, err, 502, schemas.CodeUpstreamError)
	if !strings.Contains(e.Message, "connect") {
		t.Errorf("message %q does not say the connect failed", e.Message)
	}
}

func TestUpgradeDroppedOrClosed(t *testing.T) {
	for _, f := range []codextest.Fault{codextest.FaultDrop, codextest.FaultClose1008} {
		t.Run(string(f), func(t *testing.T) {
			srv := newSim(t, codextest.Options{})
			c := newClient(t, srv, Config{})
			srv.Faults.Next(codextest.AtUpgrade, 1, f)
			_, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
			wantError(t, err, 502, schemas.CodeUpstreamError)
		})
	}
}

func TestWrongTokenIsUnauthorizedAndNotEchoed(t *testing.T) {
	srv := newSim(t, codextest.Options{Token: "the-right-token"})
	c := newClient(t, srv, Config{Token: "wrong-token-value"})
	_, err := c.Generate(context.Background(), createFrame("hi", nil), nil)
	wantError(t, err, 401, schemas.CodeUpstreamUnauthorized)
	if strings.Contains(err.Error(), "wrong-token-value") {
		t.Errorf("error %q holds the token", err)
	}
}

// TestHandshakeRedaction: the simulator never echoes credentials, so the origin's response is
// built here: a 403 whose body quotes the token and account id, cut in the middle of the token.
func TestHandshakeRedaction(t *testing.T) {
	c, err := New(Config{Token: testToken, AccountID: "acct-SECRET-77", URL: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name string
		body string
		want string
	}{
		{name: "json message", body: `{"error":{"message":"bad token ` + testToken + ` for acct-SECRET-77"}}`,
			want: "bad token [redacted] for [redacted]"},
		{name: "plain text", body: "Authorization: Bearer " + testToken, want: "Authorization: Bearer [redacted]"},
		{name: "cut mid-token", body: "echo " + testToken[:12], want: "echo [redacted]"},
		{name: "detail", body: `{"detail":"nope"}`, want: "nope"},
		{name: "long", body: strings.Repeat("x", 3000), want: strings.Repeat("x", 1024)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 403, Header: http.Header{"Retry-After": {"3"}},
				Body: io.NopCloser(strings.NewReader(tc.body))}
			err := c.classifyStatus(resp, origintext.NewRedactor(testToken, "acct-SECRET-77"), true)
			e := wantError(t, err, 403, schemas.CodeOriginForbidden)
			if e.RetryAfter != 3*time.Second {
				t.Errorf("RetryAfter %v, want 3s", e.RetryAfter)
			}
			msg := e.Message
			if strings.Contains(msg, testToken[:5]) || strings.Contains(msg, "acct-SECRET") {
				t.Errorf("message %q leaks a credential", msg)
			}
			if !strings.HasSuffix(msg, tc.want) {
				t.Errorf("message %q, want it to end with %q", msg, tc.want)
			}
			if len(msg) > 1200 {
				t.Errorf("message is %d bytes, want the origin's text cut to 1 KiB", len(msg))
			}
		})
	}
}

func TestEventRedaction(t *testing.T) {
	r := origintext.NewRedactor(testToken, "acct-SECRET-77")
	ev := []byte(`{"type":"error","status":401,"error":{"type":"invalid_request_error","code":"bad","message":"token ` + testToken + ` invalid"}}`)
	e := mapErrorEvent(ev, r, time.Now())
	if e.Status != 401 || e.Code != schemas.CodeUpstreamUnauthorized || strings.Contains(e.Message, testToken) {
		t.Errorf("got %+v: want 401 upstream_unauthorized without the token", e)
	}
	failed := []byte(`{"type":"response.failed","response":{"error":{"code":"server_error","message":"acct-SECRET-77 broke"}}}`)
	if e := mapFailed(failed, r); strings.Contains(e.Message, "acct-SECRET") || e.UpstreamCode != "server_error" {
		t.Errorf("got %+v: want server_error without the account id", e)
	}
}

func TestErrorEventRetryAfter(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name string
		ev   string
		want time.Duration
		code schemas.Code
	}{
		{name: "resets_at", ev: `{"type":"error","status":429,"error":{"type":"usage_limit_reached","resets_at":1000042}}`, want: 42 * time.Second, code: schemas.CodeUpstreamRateLimited},
		{name: "header seconds", ev: `{"type":"error","status":429,"error":{"message":"slow"},"headers":{"Retry-After":"5"}}`, want: 5 * time.Second, code: schemas.CodeUpstreamRateLimited},
		{name: "header ms", ev: `{"type":"error","error":{"code":"rate_limit_exceeded"},"headers":{"retry-after-ms":250}}`, want: 250 * time.Millisecond, code: schemas.CodeUpstreamRateLimited},
		{name: "code without status", ev: `{"type":"error","error":{"type":"usage_limit_reached"}}`, code: schemas.CodeUpstreamRateLimited},
		{name: "resets_at past", ev: `{"type":"error","status":429,"error":{"resets_at":999000}}`, code: schemas.CodeUpstreamRateLimited},
		{name: "string error", ev: `{"type":"error","status":503,"error":"overloaded"}`, code: schemas.CodeUpstreamError},
		{name: "nonsense status", ev: `{"type":"error","status":"abc"}`, code: schemas.CodeUpstreamError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mapErrorEvent([]byte(tc.ev), origintext.NewRedactor(testToken), now)
			if e.Code != tc.code || e.RetryAfter != tc.want {
				t.Errorf("got %s RetryAfter %v, want %s %v", e.Code, e.RetryAfter, tc.code, tc.want)
			}
			if e.Code == schemas.CodeUpstreamRateLimited && e.Status != 429 {
				t.Errorf("status %d, want 429", e.Status)
			}
			if e.Code == schemas.CodeUpstreamError && e.Status != 502 && e.Status != 503 {
				t.Errorf("status %d, want the event's (503) or 502", e.Status)
			}
		})
	}
}

// TestShortSecretsAreNotRedacted: a placeholder token such as "x" (as in the README's simulator
// example) must not be cut out of every event; real credentials are long and are redacted.
func TestShortSecretsAreNotRedacted(t *testing.T) {
	frame := []byte(`{"type":"response.output_text.delta","delta":"box text"}`)
	if got := origintext.NewRedactor("x", "acct").CleanFrame(frame); string(got) != string(frame) {
		t.Fatalf("cleanFrame with a 1-letter token = %s, want the frame unchanged", got)
	}
	long := []byte(`{"type":"error","error":{"message":"bad key sk-0123456789"}}`)
	if got := origintext.NewRedactor("sk-0123456789").CleanFrame(long); strings.Contains(string(got), "sk-0123456789") {
		t.Fatalf("cleanFrame kept a real-length token: %s", got)
	}
}
