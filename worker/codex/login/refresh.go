package login

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/codexpool/codexpool/internal/origintext"
)

// Defaults of AuthConfig.
const (
	DefaultRefreshURL     = "https://auth.openai.com/oauth/token"
	DefaultClientID       = "app_EMoamEEZ73f0CkXaXp7hrann"
	DefaultRefreshTimeout = 60 * time.Second
	DefaultAuthPoll       = 2 * time.Second
)

// Refusal codes of the token endpoint that end a login: only a new `codex login` helps.
const (
	codeRefreshReused      = "refresh_token_reused"
	codeRefreshExpired     = "refresh_token_expired"
	codeRefreshInvalidated = "refresh_token_invalidated"
	codeInvalidGrant       = "invalid_grant"
)

// refreshError is a failed refresh. permanent: the token endpoint refused the refresh token for
// good. uncertain: the endpoint may have spent the refresh token without the answer reaching us
// (a timeout, a cut or garbled answer), so the token must not be sent again before re-reading
// what the other holders of the login know.
type refreshError struct {
	permanent bool
	uncertain bool
	code      string // the endpoint's error code, when it sent one
	msg       string // for logs; redacted
}

func (e *refreshError) Error() string { return "codex: token refresh failed: " + e.msg }

// refreshAnswer is what a successful refresh returns; absent tokens are "".
type refreshAnswer struct {
	IDToken      string `json:"id_token"`
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

// postRefresh sends refreshToken to the token endpoint and returns its answer. Errors are
// *refreshError, or ctx.Err() when ctx ended first (which is uncertain, too).
func postRefresh(ctx context.Context, hc *http.Client, url, clientID, refreshToken string, red origintext.Redactor) (refreshAnswer, error) {
	body, _ := json.Marshal(map[string]string{
		"client_id": clientID, "grant_type": "refresh_token", "refresh_token": refreshToken,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return refreshAnswer{}, &refreshError{msg: "bad refresh URL"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return refreshAnswer{}, ctx.Err()
		}
		// Whether the request reached the endpoint is unknown unless no connection was made.
		return refreshAnswer{}, &refreshError{uncertain: !isDialError(err), msg: red.Clean(err.Error())}
	}
	defer resp.Body.Close()
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusOK {
		var a refreshAnswer
		if rerr != nil || json.Unmarshal(data, &a) != nil {
			return refreshAnswer{}, &refreshError{uncertain: true, msg: "the token endpoint's answer is not JSON"}
		}
		if a.AccessToken == "" && a.RefreshToken == "" && a.IDToken == "" {
			return refreshAnswer{}, &refreshError{uncertain: true, msg: "the token endpoint's answer holds no token"}
		}
		return a, nil
	}
	code, msg := refreshErrorBody(data)
	e := &refreshError{code: red.Clean(code)}
	switch {
	case code == codeRefreshReused || code == codeRefreshExpired || code == codeRefreshInvalidated:
		e.permanent = true
	case resp.StatusCode == http.StatusUnauthorized:
		e.permanent = true // the official client gives up on every 401 from the token endpoint
	case resp.StatusCode == http.StatusBadRequest && code == codeInvalidGrant:
		e.permanent = true
	}
	text := red.Clean(msg)
	if e.code != "" {
		text = e.code + ": " + text
	}
	e.msg = fmt.Sprintf("HTTP %d from the token endpoint: %s", resp.StatusCode, text)
	return refreshAnswer{}, e
}

// refreshErrorBody returns the code and message of a token endpoint error body, in the OpenAI
// shape {"error":{"code","message"}} or the OAuth one {"error":"invalid_grant","error_description"}.
func refreshErrorBody(data []byte) (code, msg string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return "", string(data)
	}
	d := origintext.Detail(obj["error"])
	code, msg = origintext.Str(d.Code), origintext.Str(d.Message)
	if code == "" {
		code = origintext.Str(d.Type)
	}
	if code == "" {
		code = origintext.Str(obj["error"]) // the OAuth shape: error is the code
		if code == origintext.Str(d.Message) {
			msg = ""
		}
	}
	if code == "" {
		code = origintext.Str(obj["code"])
	}
	if msg == "" {
		msg = origintext.Str(obj["error_description"])
	}
	if msg == "" {
		msg = origintext.Str(obj["message"])
	}
	return code, msg
}

// isDialError reports whether err happened before a connection existed (nothing was sent).
func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// userAgent is sent with refresh requests: the same name as codex.Originator.
const userAgent = "codexpool"
