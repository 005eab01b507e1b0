package login_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex"
	"github.com/codexpool/codexpool/worker/codex/login"
	"github.com/codexpool/codexpool/worker/codextest"
)

// These tests run a codex.Client on an Auth: how a login and a client meet (a 401, an account
// out of service, a socket that outlives its token).

// newCodexClient returns a codex.Client for srv, closed at cleanup (before the simulator is
// checked).
func newCodexClient(t testing.TB, srv *codextest.Server, cfg codex.Config) *codex.Client {
	t.Helper()
	cfg.URL = srv.URL
	c, err := codex.New(cfg)
	if err != nil {
		t.Fatalf("codex.New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// TestClientRetries401WithARefreshedToken: an access token the origin refuses (here: one it
// never issued) is refreshed after the 401 and the generation succeeds, on both transports.
func TestClientRetries401WithARefreshedToken(t *testing.T) {
	for _, wsOff := range []bool{false, true} {
		t.Run(fmt.Sprintf("ws_off=%v", wsOff), func(t *testing.T) {
			srv := login.NewLoginSim(t, time.Hour)
			srv.Limits.SetWSOff(wsOff)
			path, l := login.WriteLogin(t, srv, t.TempDir(), "auth.json")
			l.AccessToken = "opaque-token-the-origin-refuses" // no exp: no proactive refresh
			login.WriteAuthJSON(t, path, l)
			a := login.OpenTestAuth(t, srv, path, login.AuthConfig{})
			c := newCodexClient(t, srv, codex.Config{Credentials: a})
			if _, err := c.Generate(context.Background(), login.CreateFrame("hi"), nil); err != nil {
				t.Fatalf("got %v, want success after one refresh", err)
			}
			if st := srv.Stats(); st.Unauthorized != 1 || st.RefreshOK != 1 {
				t.Errorf("%d 401s, %d refreshes; want 1 and 1", st.Unauthorized, st.RefreshOK)
			}
			if c.Stats().Unauthorized != 1 {
				t.Errorf("client counted %d 401s, want 1", c.Stats().Unauthorized)
			}
		})
	}
}

// TestAuthPermanentRefusalTakesTheAccountOut: a refresh token spent elsewhere is refused as
// reused: the account goes out of service with one log line; requests get 401 "log in again"
// without a refresh storm; a new login in the file brings it back.
func TestAuthPermanentRefusalTakesTheAccountOut(t *testing.T) {
	srv := login.NewLoginSim(t, time.Hour)
	path, l := login.WriteLogin(t, srv, t.TempDir(), "auth.json")
	login.Spend(t, srv, l.RefreshToken) // someone else refreshed it, and kept the answer
	log, logs := login.LogBuffer()
	a := login.OpenTestAuth(t, srv, path, login.AuthConfig{Logger: log})
	c := newCodexClient(t, srv, codex.Config{Credentials: a})
	if _, err := a.Unauthorized(context.Background(), login.MustCreds(t, a)); err == nil {
		t.Fatal("the refresh of a spent token succeeded")
	}
	for range 20 {
		_, err := c.Generate(context.Background(), login.CreateFrame("hi"), nil)
		e := login.WantError(t, err, 401, schemas.CodeUpstreamUnauthorized)
		if !strings.Contains(e.Message, "log in again") || e.UpstreamCode != "refresh_token_reused" {
			t.Fatalf("message %q (%s), want one saying to log in again", e.Message, e.UpstreamCode)
		}
	}
	st := srv.Stats()
	if st.RefreshCalls != 2 || st.UpgradesAccepted != 0 { // ours and the spend
		t.Errorf("%d refresh calls, %d upgrades; want 2 (no retry storm) and 0 (no request reaches the origin)", st.RefreshCalls, st.UpgradesAccepted)
	}
	if !a.Stats().OutOfService || !c.Stats().Credentials.OutOfService {
		t.Error("stats do not say out of service")
	}
	if n := strings.Count(logs.String(), "account out of service"); n != 1 {
		t.Errorf("%d out-of-service log lines, want 1", n)
	}
	l2, _ := srv.Logins.Issue(login.Alice)
	login.WriteAuthJSON(t, path, l2)
	login.WaitFor(t, "the account to come back", func() bool { _, err := a.Credentials(); return err == nil })
	if _, err := c.Generate(context.Background(), login.CreateFrame("hi"), nil); err != nil {
		t.Fatalf("after a new login: %v", err)
	}
	login.NoSecrets(t, "the log", logs.String(), login.LoginSecrets(l, l2)...)
}

// TestPooledSocketOutlivesItsToken: a socket opened with a token that has since been rotated
// keeps carrying generations until it ends; new sockets use the new token.
func TestPooledSocketOutlivesItsToken(t *testing.T) {
	srv := login.NewLoginSim(t, 2*time.Second)
	path, l := login.WriteLogin(t, srv, t.TempDir(), "auth.json")
	a := login.OpenTestAuth(t, srv, path, login.AuthConfig{})
	c := newCodexClient(t, srv, codex.Config{Credentials: a})
	if _, err := c.Generate(context.Background(), login.CreateFrame("first"), nil); err != nil {
		t.Fatal(err)
	}
	login.WaitFor(t, "a refresh", func() bool { return a.Stats().Refreshes > 0 })
	res, err := c.Generate(context.Background(), login.CreateFrame("second"), nil)
	if err != nil || !res.Reused {
		t.Fatalf("after the rotation: %v, reused %v; want the old socket to carry on", err, res != nil && res.Reused)
	}
	if got := srv.LastUpgradeHeader().Get("Authorization"); got != "Bearer "+l.AccessToken {
		t.Error("test setup: the socket was not opened with the first token")
	}
	if login.MustCreds(t, a).Token == l.AccessToken {
		t.Error("the token was not rotated")
	}
}
