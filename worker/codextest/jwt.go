package codextest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Issued access and id tokens are real JWTs (HS256 with a key drawn at server start), so a
// client can read their exp and claims as it would the real ones, and the server can verify them
// without remembering each token.

// Audiences: an access token is a bearer for the API, an id token is not.
const (
	audAccess = "https://api.openai.com/v1"
	audID     = DefaultClientID
)

// DefaultClientID is the OAuth client id the Codex CLI sends to the token endpoint; it is the
// audience of issued id tokens. The simulator's /oauth/token accepts any client_id.
const DefaultClientID = "app_EMoamEEZ73f0CkXaXp7hrann"

// authClaim is the "https://api.openai.com/auth" claim.
type authClaim struct {
	ChatGPTAccountID string `json:"chatgpt_account_id,omitempty"`
	ChatGPTPlanType  string `json:"chatgpt_plan_type,omitempty"`
}

type tokenClaims struct {
	Iss   string    `json:"iss"`
	Aud   string    `json:"aud"`
	Sub   string    `json:"sub"`
	Iat   int64     `json:"iat"`
	Exp   int64     `json:"exp"`
	Jti   string    `json:"jti"`
	Email string    `json:"email,omitempty"`
	Auth  authClaim `json:"https://api.openai.com/auth"`
}

var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

func signJWT(key []byte, c *tokenClaims) string {
	payload, _ := json.Marshal(c)
	msg := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(payload)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msg))
	return msg + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

var (
	errNotJWT     = errors.New("codextest: not a token of this server")
	errJWTExpired = errors.New("codextest: token expired")
)

// verifyJWT checks tok's signature and audience, then its exp against now. An expired token
// returns its claims with errJWTExpired.
func verifyJWT(key []byte, tok string, now time.Time) (*tokenClaims, error) {
	i := strings.LastIndexByte(tok, '.')
	if i < 0 || strings.Count(tok, ".") != 2 {
		return nil, errNotJWT
	}
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	if err != nil {
		return nil, errNotJWT
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(tok[:i]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return nil, errNotJWT
	}
	head, payload, _ := strings.Cut(tok[:i], ".")
	if head != jwtHeader {
		return nil, errNotJWT
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, errNotJWT
	}
	var c tokenClaims
	if json.Unmarshal(b, &c) != nil || c.Aud != audAccess {
		return nil, errNotJWT
	}
	if !now.Before(time.Unix(c.Exp, 0)) {
		return &c, errJWTExpired
	}
	return &c, nil
}
