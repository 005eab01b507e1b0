package codex

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Credentials are what the client authenticates with. Print them freely: String, GoString and
// LogValue never show the token.
type Credentials struct {
	Token     string // bearer token: API key or ChatGPT access token
	AccountID string // ChatGPT account id; may be empty
	Source    string // "env" or the path of the auth file they came from
}

// String describes the credentials without the token.
func (c Credentials) String() string {
	acct := "none"
	if c.AccountID != "" {
		acct = "set"
	}
	tok := "none"
	if c.Token != "" {
		tok = "set"
	}
	return fmt.Sprintf("codex credentials from %s (token %s, account id %s)", c.Source, tok, acct)
}

// GoString keeps %#v from printing the token.
func (c Credentials) GoString() string { return c.String() }

// LogValue keeps slog from printing the token.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// authJSON is the part of the Codex CLI's auth.json we read. Pointers: null means absent.
type authJSON struct {
	AuthMode *string `json:"auth_mode"`
	APIKey   *string `json:"OPENAI_API_KEY"`
	Tokens   *struct {
		IDToken     *string `json:"id_token"`
		AccessToken *string `json:"access_token"`
		AccountID   *string `json:"account_id"`
	} `json:"tokens"`
}

func val(p *string) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(*p)
}

// ErrNoCredentials is wrapped by ResolveCredentials's error when neither a token nor a login file
// gives credentials, so callers can say how their users configure them.
var ErrNoCredentials = errors.New("codex: no credentials")

// ResolveCredentials returns the credentials to use. token and accountID are given values (from
// the caller's configuration) and win when set. Without a token
// it reads authFile ("~" is expanded), the Codex CLI's auth.json: OPENAI_API_KEY, or
// tokens.access_token with tokens.account_id or, failing that, the chatgpt_account_id claim of
// tokens.id_token. null values count as absent and unknown fields are ignored. Errors never hold
// a secret.
func ResolveCredentials(token, accountID, authFile string) (Credentials, error) {
	token, accountID = strings.TrimSpace(token), strings.TrimSpace(accountID)
	if token != "" {
		return Credentials{Token: token, AccountID: accountID, Source: "env"}, nil
	}
	if authFile == "" {
		return Credentials{}, fmt.Errorf("%w: no token and no auth file given", ErrNoCredentials)
	}
	path, err := expandHome(authFile)
	if err != nil {
		return Credentials{}, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Credentials{}, fmt.Errorf("%w: no token given and %s does not exist (run `codex login`): %w", ErrNoCredentials, path, fs.ErrNotExist)
		}
		return Credentials{}, fmt.Errorf("codex: read auth file: %w", err)
	}
	var f authJSON
	if err := json.Unmarshal(data, &f); err != nil {
		// Not %w: a JSON error may quote part of the file.
		return Credentials{}, fmt.Errorf("codex: auth file %s is not the Codex CLI's JSON", path)
	}
	creds := Credentials{AccountID: accountID, Source: path}
	apiKey := val(f.APIKey)
	var access, acct, idToken string
	if f.Tokens != nil {
		access, acct, idToken = val(f.Tokens.AccessToken), val(f.Tokens.AccountID), val(f.Tokens.IDToken)
	}
	useTokens := access != "" && (apiKey == "" || strings.EqualFold(val(f.AuthMode), "chatgpt"))
	switch {
	case useTokens:
		creds.Token = access
		if creds.AccountID == "" {
			creds.AccountID = acct
		}
		if creds.AccountID == "" {
			creds.AccountID = accountFromIDToken(idToken)
		}
	case apiKey != "":
		creds.Token = apiKey
	default:
		return Credentials{}, fmt.Errorf("%w: %s has neither OPENAI_API_KEY nor tokens.access_token (run `codex login`)", ErrNoCredentials, path)
	}
	return creds, nil
}

// expandHome expands a leading "~" to the user's home directory.
func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") && !strings.HasPrefix(p, `~\`) {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("codex: expand %s: %w", p, err)
	}
	return filepath.Join(home, p[1:]), nil
}

// accountFromIDToken returns the chatgpt_account_id claim of a JWT id token, "" when absent.
// The signature is not checked: the origin does that; we only pick the header value.
func accountFromIDToken(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) < 2 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var claims struct {
		Auth *struct {
			AccountID *string `json:"chatgpt_account_id"`
		} `json:"https://api.openai.com/auth"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Auth == nil {
		return ""
	}
	return val(claims.Auth.AccountID)
}
