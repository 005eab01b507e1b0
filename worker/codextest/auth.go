package codextest

import (
	"errors"
	"net/http"
	"strings"
	"time"
)

// authFailure is a 401 to answer.
type authFailure struct {
	code, msg string
}

var (
	failBadToken = &authFailure{"invalid_api_key", "Missing or invalid bearer token."}
	failExpired  = &authFailure{"token_expired", "Provided authentication token is expired. Please try signing in again."}
)

// authenticate resolves r's bearer token at now. Without Options.Accounts it checks
// Options.Token (if set) and returns a nil account. With accounts it returns the account whose
// static token or valid issued access token r carries. An expired token of ours is counted
// against its account here; the caller counts the 401 it answers.
func (s *Server) authenticate(r *http.Request, now time.Time) (*account, *authFailure) {
	h := r.Header.Get("Authorization")
	if len(s.Accounts.list) == 0 {
		if s.opts.Token != "" && h != "Bearer "+s.opts.Token {
			return nil, failBadToken
		}
		return nil, nil
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return nil, failBadToken
	}
	if a := s.Accounts.byToken[tok]; a != nil {
		return a, nil
	}
	a, err := s.Logins.verify(tok, now)
	switch {
	case a == nil:
		return nil, failBadToken
	case errors.Is(err, errJWTExpired):
		a.c.unauthorized.Add(1)
		return nil, failExpired
	}
	return a, nil
}
