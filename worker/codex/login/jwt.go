package login

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// claims are the parts of a ChatGPT JWT (access or id token) the client uses. The signature is
// not checked: the origin does that; the client only reads when to refresh and whose login it is.
type claims struct {
	Exp  float64 `json:"exp"`
	Iat  float64 `json:"iat"`
	Sub  string  `json:"sub"`
	Auth struct {
		AccountID string `json:"chatgpt_account_id"`
	} `json:"https://api.openai.com/auth"`
}

// parseClaims returns tok's claims; the zero claims when tok is not a JWT.
func parseClaims(tok string) claims {
	var c claims
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return c
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return c
	}
	if json.Unmarshal(payload, &c) != nil {
		return claims{}
	}
	return c
}

// unixTime converts JWT seconds to a time; zero for absent, negative or absurd values.
func unixTime(s float64) time.Time {
	if s <= 0 || s > 1e11 || s != s {
		return time.Time{}
	}
	return time.Unix(int64(s), int64((s-float64(int64(s)))*1e9))
}

func (c claims) expiry() time.Time { return unixTime(c.Exp) }
func (c claims) issued() time.Time { return unixTime(c.Iat) }

// accountFromIDToken returns the chatgpt_account_id claim of a JWT id token, "" when absent.
func accountFromIDToken(tok string) string { return strings.TrimSpace(parseClaims(tok).Auth.AccountID) }
