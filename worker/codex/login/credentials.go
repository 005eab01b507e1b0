package login

import (
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
	t, _, err := readAuthFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Credentials{}, fmt.Errorf("%w: no token given and %s does not exist (run `codex login`): %w", ErrNoCredentials, path, fs.ErrNotExist)
	case errors.Is(err, errAuthNoTokens):
		return Credentials{}, fmt.Errorf("%w: %s %w", ErrNoCredentials, path, errAuthNoTokens)
	case err != nil:
		return Credentials{}, err
	}
	creds := Credentials{Token: t.bearer(), AccountID: accountID, Source: path}
	if creds.AccountID == "" && t.AccessToken != "" {
		creds.AccountID = t.AccountID
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
