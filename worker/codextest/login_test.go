package codextest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// jwtClaims decodes a JWT's header and claims without verifying it, as a client does.
func jwtClaims(t *testing.T, tok string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", tok)
	}
	dec := func(s string) map[string]any {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("JWT part %q: %v", s, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("JWT part %s: %v", b, err)
		}
		return m
	}
	return dec(parts[0]), dec(parts[1])
}

func TestNewLoginTokensAndAuthJSON(t *testing.T) {
	s := newServer(t, Options{TokenLifetime: 90 * time.Minute, Accounts: []Account{{Name: "alice", AccountID: "acct-uuid-1", PlanType: "team"}}})
	before := time.Now()
	l, err := s.Logins.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Logins.Issue("bob"); err == nil {
		t.Error("NewLogin of an unknown account succeeded")
	}
	for _, tok := range []struct{ name, jwt string }{{"access", l.AccessToken}, {"id", l.IDToken}} {
		h, c := jwtClaims(t, tok.jwt)
		if h["alg"] != "HS256" || h["typ"] != "JWT" {
			t.Errorf("%s token header %v, want HS256 JWT", tok.name, h)
		}
		auth, _ := c["https://api.openai.com/auth"].(map[string]any)
		exp, _ := c["exp"].(float64)
		iat, _ := c["iat"].(float64)
		if c["sub"] != "alice" || auth["chatgpt_account_id"] != "acct-uuid-1" || auth["chatgpt_plan_type"] != "team" {
			t.Errorf("%s token claims %v, want sub alice and the account id", tok.name, c)
		}
		if iat < float64(before.Unix()) || exp-iat < 90*60 || exp-iat > 90*60+1 {
			t.Errorf("%s token iat %v exp %v, want exp = iat + 90 min", tok.name, iat, exp)
		}
	}
	if l.AccountID != "acct-uuid-1" || l.RefreshToken == "" || !l.ExpiresAt.After(before.Add(89*time.Minute)) {
		t.Errorf("login %+v", l)
	}

	var f struct {
		AuthMode string          `json:"auth_mode"`
		APIKey   json.RawMessage `json:"OPENAI_API_KEY"`
		Tokens   map[string]any  `json:"tokens"`
		Last     string          `json:"last_refresh"`
	}
	if err := json.Unmarshal(l.AuthJSON(), &f); err != nil {
		t.Fatalf("AuthJSON %s: %v", l.AuthJSON(), err)
	}
	last, err := time.Parse(time.RFC3339, f.Last)
	if f.AuthMode != "chatgpt" || string(f.APIKey) != "null" || err != nil || last.Before(before.Add(-time.Second)) ||
		f.Tokens["access_token"] != l.AccessToken || f.Tokens["refresh_token"] != l.RefreshToken ||
		f.Tokens["id_token"] != l.IDToken || f.Tokens["account_id"] != "acct-uuid-1" {
		t.Errorf("AuthJSON %s", l.AuthJSON())
	}
	if noID := (Login{}).AuthJSON(); !bytes.Contains(noID, []byte(`"account_id": null`)) {
		t.Errorf("AuthJSON without an account id: %s, want account_id null", noID)
	}

	// GET /_sim/login answers the auth.json of a new login that the server accepts.
	resp, err := httpClient(t).Get(s.ControlURL + "/login?account=alice")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(body, &f); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /login: %d %s", resp.StatusCode, body)
	}
	if f.Tokens["access_token"] == l.AccessToken {
		t.Error("GET /login returned the same tokens as an earlier login")
	}
	mustDialAs(t, s, f.Tokens["access_token"].(string))
	if code, m := control(t, s, "GET", "/login?account=bob"); code != 404 || m["error"] == nil {
		t.Errorf("GET /login?account=bob: %d %v, want 404", code, m)
	}
}

// TestTokenExpiry: an expired access token gets 401 token_expired on the upgrade and over HTTP,
// while a socket opened before the expiry keeps serving.
func TestTokenExpiry(t *testing.T) {
	s := newServer(t, Options{Words: 1, TokenLifetime: time.Second, Accounts: []Account{{Name: "a"}}})
	l, err := s.Logins.Issue("a")
	if err != nil {
		t.Fatal(err)
	}
	old := mustDialAsConn(t, s, l.AccessToken)
	var resp *http.Response
	eventually(t, "the token expires", func() bool {
		c, r, err := dial(t, s.URL, bearer(l.AccessToken))
		if err == nil {
			c.Close()
			return false
		}
		resp = r
		return true
	})
	if time.Now().Before(l.ExpiresAt) {
		t.Errorf("refused at %v, before the token's exp %v", time.Now(), l.ExpiresAt)
	}
	if resp == nil || resp.StatusCode != 401 {
		t.Fatalf("expired token: %v, want 401", resp)
	}
	if code := rejectBody(t, resp)["code"]; code != "token_expired" {
		t.Errorf("code %v, want token_expired", code)
	}
	hresp := post(context.Background(), t, httpClient(t), s.HTTPURL, bearer(l.AccessToken), streamBody("x", nil))
	if hresp.StatusCode != 401 || rejectBody(t, hresp)["code"] != "token_expired" {
		t.Errorf("expired token over HTTP: %d, want 401 token_expired", hresp.StatusCode)
	}
	send(t, old, createFrame("still here", nil))
	if evs := readResponse(t, old); textOf(evs) != Answer("still here", 1) {
		t.Errorf("socket opened before the expiry: %v, want it to keep answering", types(evs))
	}
	if as := s.Accounts.Stats("a"); as.Unauthorized < 2 || as.Completed != 1 {
		t.Errorf("account stats %+v, want >= 2 unauthorized, 1 completed", as)
	}
}

type refreshAnswer struct {
	status int
	body   []byte
	m      map[string]any
}

func (a refreshAnswer) code() any {
	e, _ := a.m["error"].(map[string]any)
	return e["code"]
}

func refresh(t *testing.T, cl *http.Client, s *Server, body string) refreshAnswer {
	t.Helper()
	resp, err := cl.Post(s.RefreshURL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", s.RefreshURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := refreshAnswer{status: resp.StatusCode, body: b}
	_ = json.Unmarshal(b, &a.m)
	return a
}

func refreshBody(rt string) string {
	b, _ := json.Marshal(map[string]string{"client_id": DefaultClientID, "grant_type": "refresh_token", "refresh_token": rt})
	return string(b)
}

func TestRefreshRotationAndReuse(t *testing.T) {
	s := newServer(t, Options{TokenLifetime: time.Hour, Accounts: []Account{{Name: "a"}, {Name: "b"}}})
	if !strings.HasSuffix(s.RefreshURL, RefreshPath) {
		t.Fatalf("RefreshURL %q", s.RefreshURL)
	}
	cl := httpClient(t)
	l0, _ := s.Logins.Issue("a")
	other, _ := s.Logins.Issue("a") // another family of the same account

	r1 := refresh(t, cl, s, refreshBody(l0.RefreshToken))
	if r1.status != 200 {
		t.Fatalf("first refresh: %d %s", r1.status, r1.body)
	}
	rt1, _ := r1.m["refresh_token"].(string)
	at1, _ := r1.m["access_token"].(string)
	if rt1 == "" || rt1 == l0.RefreshToken || at1 == "" || r1.m["id_token"] == nil || r1.m["expires_in"] != 3600.0 {
		t.Fatalf("first refresh %s, want new tokens and expires_in 3600", r1.body)
	}
	mustDialAs(t, s, at1)

	r2 := refresh(t, cl, s, refreshBody(rt1))
	rt2, _ := r2.m["refresh_token"].(string)
	at2, _ := r2.m["access_token"].(string)
	if r2.status != 200 || rt2 == "" {
		t.Fatalf("second refresh: %d %s", r2.status, r2.body)
	}

	// Reusing a spent token is detected, and revokes the whole family.
	reuse := refresh(t, cl, s, refreshBody(l0.RefreshToken))
	if reuse.status != 401 || reuse.code() != codeRefreshReused {
		t.Fatalf("reuse: %d %s, want 401 refresh_token_reused", reuse.status, reuse.body)
	}
	for _, rt := range []string{rt2, l0.RefreshToken} {
		if r := refresh(t, cl, s, refreshBody(rt)); r.status != 401 || r.code() != codeRefreshInvalidated {
			t.Errorf("family member after the reuse: %d %s, want 401 refresh_token_invalidated", r.status, r.body)
		}
	}
	mustDialAs(t, s, at2) // issued access tokens stay valid until exp
	if r := refresh(t, cl, s, refreshBody(other.RefreshToken)); r.status != 200 {
		t.Errorf("another family of the account: %d %s, want 200", r.status, r.body)
	}

	st := s.Stats()
	if st.RefreshCalls != 6 || st.RefreshOK != 3 || st.RefreshReused != 1 || st.RefreshInvalidated != 2 {
		t.Errorf("stats %+v, want 6 calls, 3 ok, 1 reused, 2 invalidated", st)
	}
	if as := s.Accounts.Stats("a"); as.RefreshCalls != 6 || as.RefreshOK != 3 || as.RefreshReused != 1 || as.RefreshInvalidated != 2 {
		t.Errorf("account a %+v, want 6 calls, 3 ok, 1 reused, 2 invalidated", as)
	}
	if as := s.Accounts.Stats("b"); as.RefreshCalls != 0 {
		t.Errorf("account b %+v, want no refreshes", as)
	}
}

func TestRefreshBadRequests(t *testing.T) {
	s := newServer(t, Options{Accounts: []Account{{Name: "a"}}})
	cl := httpClient(t)
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"unknown token", refreshBody("rt_nope"), 401, codeRefreshInvalidated},
		{"not JSON", `{"grant_type":`, 400, "invalid_request"},
		{"wrong grant", `{"grant_type":"authorization_code","refresh_token":"x"}`, 400, "invalid_request"},
		{"no token", `{"grant_type":"refresh_token"}`, 400, "invalid_request"},
	}
	for _, tt := range tests {
		if r := refresh(t, cl, s, tt.body); r.status != tt.status || r.code() != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.name, r.status, r.body, tt.status, tt.code)
		}
	}
	resp, err := cl.Get(s.RefreshURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET %s: %d, want 405", RefreshPath, resp.StatusCode)
	}
}

// TestRefreshFaults checks each hostile answer of the token endpoint, and whether it spent the
// refresh token (the next use of the same token tells).
func TestRefreshFaults(t *testing.T) {
	tests := []struct {
		fault     RefreshFault
		viaHTTP   bool
		timeout   time.Duration // client timeout; 0 = the default
		check     func(t *testing.T, r refreshAnswer, err error)
		wantSpent bool
	}{
		{fault: RefreshFault500, check: func(t *testing.T, r refreshAnswer, err error) {
			if err != nil || r.status != 500 || r.code() != "server_error" {
				t.Errorf("got %v %d %s, want 500 server_error", err, r.status, r.body)
			}
		}},
		{fault: RefreshFaultGarbage, viaHTTP: true, wantSpent: true, check: func(t *testing.T, r refreshAnswer, err error) {
			if err != nil || r.status != 200 || json.Valid(r.body) {
				t.Errorf("got %v %d %q, want 200 with a body that is not JSON", err, r.status, r.body)
			}
		}},
		{fault: RefreshFaultNoRefresh, wantSpent: true, check: func(t *testing.T, r refreshAnswer, err error) {
			_, hasRT := r.m["refresh_token"]
			if err != nil || r.status != 200 || hasRT || r.m["access_token"] == nil || r.m["id_token"] == nil {
				t.Errorf("got %v %d %s, want 200 with access and id tokens and no refresh_token", err, r.status, r.body)
			}
		}},
		{fault: RefreshFaultSlow, timeout: 300 * time.Millisecond, wantSpent: true, check: func(t *testing.T, r refreshAnswer, err error) {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("got %v %d %s, want the client's timeout", err, r.status, r.body)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.fault), func(t *testing.T) {
			s := newServer(t, Options{Accounts: []Account{{Name: "a"}}})
			l, _ := s.Logins.Issue("a")
			if tt.viaHTTP {
				if code, _ := control(t, s, "POST", "/refresh_fault?n=1&kind="+string(tt.fault)); code != 200 {
					t.Fatalf("POST /refresh_fault: %d", code)
				}
			} else {
				s.Faults.Refresh(1, tt.fault)
			}
			cl := httpClient(t)
			if tt.timeout > 0 {
				cl.Timeout = tt.timeout
			}
			resp, err := cl.Post(s.RefreshURL, "application/json", strings.NewReader(refreshBody(l.RefreshToken)))
			var r refreshAnswer
			if err == nil {
				r.status = resp.StatusCode
				r.body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				_ = json.Unmarshal(r.body, &r.m)
			}
			tt.check(t, r, err)

			again := refresh(t, httpClient(t), s, refreshBody(l.RefreshToken))
			switch {
			case tt.wantSpent && again.code() != codeRefreshReused:
				t.Errorf("reusing the token after the fault: %d %s, want refresh_token_reused (it was spent)", again.status, again.body)
			case !tt.wantSpent && again.status != 200:
				t.Errorf("using the token after the fault: %d %s, want 200 (it was not spent)", again.status, again.body)
			}
			if st := s.Stats(); st.Faults != 1 || st.RefreshCalls != 2 {
				t.Errorf("stats %+v, want 1 fault, 2 refresh calls", st)
			}
		})
	}
	s := newServer(t, Options{})
	for _, path := range []string{"/refresh_fault?kind=nope", "/refresh_fault?n=x&kind=slow"} {
		if code, _ := control(t, s, "POST", path); code != 400 {
			t.Errorf("POST %s: %d, want 400", path, code)
		}
	}
	s.Faults.Refresh(3, RefreshFault500)
	s.Faults.Clear()
	if r := refresh(t, httpClient(t), s, refreshBody("rt_x")); r.status != 401 {
		t.Errorf("after Faults.Clear: %d, want the queued fault forgotten (401)", r.status)
	}
}

func TestRefreshLatency(t *testing.T) {
	s := newServer(t, Options{RefreshLatency: 200 * time.Millisecond, Accounts: []Account{{Name: "a"}}})
	l, _ := s.Logins.Issue("a")
	start := time.Now()
	if r := refresh(t, httpClient(t), s, refreshBody(l.RefreshToken)); r.status != 200 {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("answered after %v, want >= 200ms", d)
	}
}
