package codextest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// RefreshPath is the path of RefreshURL, the OAuth token endpoint.
const RefreshPath = "/oauth/token"

// RefreshFault names a way for the token endpoint to misbehave, for [Faults.Refresh].
type RefreshFault string

// The refresh faults.
const (
	// RefreshFaultSlow answers after SlowRefresh (or never, when the client goes away first).
	// The refresh token is spent when the request arrives, so a client that timed out has lost
	// the rotation: its next use of the old token is a reuse.
	RefreshFaultSlow RefreshFault = "slow"
	// RefreshFault500 answers 500 with a JSON error body before looking at the request; nothing
	// is spent.
	RefreshFault500 RefreshFault = "500"
	// RefreshFaultGarbage answers 200 with a body that is not JSON. A valid refresh token is spent
	// all the same (the origin rotated; the answer was mangled on the way).
	RefreshFaultGarbage RefreshFault = "garbage"
	// RefreshFaultNoRefresh answers a valid refresh token with 200 and new access and id tokens
	// but no refresh_token, as a buggy server would: the old refresh token is spent all the same.
	RefreshFaultNoRefresh RefreshFault = "no_refresh"
)

// SlowRefresh is how long RefreshFaultSlow holds its answer.
const SlowRefresh = 30 * time.Second

// ParseRefreshFault checks s and returns it as a RefreshFault.
func ParseRefreshFault(s string) (RefreshFault, error) {
	switch f := RefreshFault(s); f {
	case RefreshFaultSlow, RefreshFault500, RefreshFaultGarbage, RefreshFaultNoRefresh:
		return f, nil
	}
	return "", fmt.Errorf("codextest: unknown refresh fault %q", s)
}

// serveRefresh is POST /oauth/token: refresh-token rotation with reuse detection.
func (s *Server) serveRefresh(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, 0, "method_not_allowed", "use POST")
		return
	}
	s.c.refreshCalls.Add(1)
	fault := s.Faults.nextRefresh()
	if fault != "" {
		s.c.faults.Add(1)
		s.logf("codextest: refresh fault %s", fault)
	}
	if fault == RefreshFault500 {
		writeError(w, http.StatusInternalServerError, 0, "server_error", "The token endpoint had an error (simulated).")
		return
	}
	tok, ok := readRefreshToken(w, r)
	if !ok {
		return
	}
	out := s.Logins.rotate(tok, time.Now())
	s.countRefresh(out)

	delay := s.opts.RefreshLatency
	if fault == RefreshFaultSlow {
		delay = SlowRefresh
	}
	if delay > 0 && !s.sleep(r.Context(), delay) {
		return // what the client would have got is lost with it
	}
	s.answerRefresh(w, out, fault)
}

// readRefreshToken reads the refresh token of a token request, or answers 400 (nothing, when
// the client went away) and returns false.
func readRefreshToken(w http.ResponseWriter, r *http.Request) (string, bool) {
	var req struct {
		ClientID     string `json:"client_id"`
		GrantType    string `json:"grant_type"`
		RefreshToken string `json:"refresh_token"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return "", false // the client went away
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, 0, "invalid_request", "The body is not a JSON object.")
		return "", false
	}
	if req.GrantType != "refresh_token" || req.RefreshToken == "" {
		writeError(w, http.StatusBadRequest, 0, "invalid_request", `Want grant_type "refresh_token" and a refresh_token.`)
		return "", false
	}
	return req.RefreshToken, true
}

// answerRefresh writes the token endpoint's answer for out, mangled by fault.
func (s *Server) answerRefresh(w http.ResponseWriter, out refreshOutcome, fault RefreshFault) {
	switch {
	case fault == RefreshFaultGarbage:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "<html><body>502 Bad Gateway (simulated garbage)</body></html>\n")
	case !out.ok:
		msg := "Your refresh token has already been used to generate a new access token. Please try signing in again."
		if out.code == codeRefreshInvalidated {
			msg = "Your refresh token has been invalidated. Please try signing in again."
		}
		writeError(w, http.StatusUnauthorized, 0, out.code, msg)
	default:
		resp := map[string]any{
			"access_token":  out.login.AccessToken,
			"id_token":      out.login.IDToken,
			"refresh_token": out.login.RefreshToken,
			"expires_in":    s.opts.expiresIn(),
		}
		if fault == RefreshFaultNoRefresh {
			delete(resp, "refresh_token")
		}
		writeJSON(w, resp)
	}
}

func (s *Server) countRefresh(out refreshOutcome) {
	global, per := &s.c.refreshInvalidated, (*acctCounters).invalidated
	switch {
	case out.ok:
		global, per = &s.c.refreshOK, (*acctCounters).ok
	case out.code == codeRefreshReused:
		global, per = &s.c.refreshReused, (*acctCounters).reused
	}
	global.Add(1)
	if out.acct != nil {
		out.acct.c.refreshCalls.Add(1)
		per(&out.acct.c).Add(1)
	}
}

func (c *acctCounters) ok() *atomic.Int64          { return &c.refreshOK }
func (c *acctCounters) reused() *atomic.Int64      { return &c.refreshReused }
func (c *acctCounters) invalidated() *atomic.Int64 { return &c.refreshInvalidated }

// sleep waits d, and reports false when ctx ends or the server closes first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}
