package login

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// tokens are a login as the Codex CLI keeps it in auth.json. An API-key login has only APIKey.
type tokens struct {
	APIKey       string    `json:"api_key,omitempty"`
	IDToken      string    `json:"id_token,omitempty"`
	AccessToken  string    `json:"access_token,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	AccountID    string    `json:"account_id,omitempty"`
	LastRefresh  time.Time `json:"last_refresh,omitzero"`
}

// bearer returns the token sent to the origin: the access token of a ChatGPT login, else the key.
func (t tokens) bearer() string {
	if t.AccessToken != "" {
		return t.AccessToken
	}
	return t.APIKey
}

// same reports whether t and u are the same login state (what a reload or an update would change).
func (t tokens) same(u tokens) bool {
	return t.AccessToken == u.AccessToken && t.RefreshToken == u.RefreshToken &&
		t.IDToken == u.IDToken && t.APIKey == u.APIKey && t.AccountID == u.AccountID
}

// expiry is the access token's exp (zero when it is not a JWT or has none).
func (t tokens) expiry() time.Time { return parseClaims(t.AccessToken).expiry() }

// secrets lists what must never be shown: every token and the key.
func (t tokens) secrets() []string {
	return []string{t.APIKey, t.IDToken, t.AccessToken, t.RefreshToken}
}

// fileStamp tells whether a file changed since it was read, without reading it.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

func stampOf(fi os.FileInfo) fileStamp {
	return fileStamp{mod: fi.ModTime(), size: fi.Size(), ino: inode(fi)}
}

// readAuthFile reads a Codex CLI auth.json: OPENAI_API_KEY, or the tokens of a ChatGPT login
// (tokens.account_id, else the id token's chatgpt_account_id claim) and last_refresh. null counts
// as absent and unknown fields are ignored. Errors never quote the file.
func readAuthFile(path string) (tokens, fileStamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return tokens{}, fileStamp{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return tokens{}, fileStamp{}, err
	}
	// 1 MiB is far more than any login; the cap keeps a wrong path (a log file) harmless.
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, 1<<20)); err != nil {
		return tokens{}, fileStamp{}, fmt.Errorf("codex: read auth file: %w", err)
	}
	t, err := parseAuthJSON(buf.Bytes())
	if err != nil {
		return tokens{}, fileStamp{}, fmt.Errorf("codex: auth file %s %w", path, err)
	}
	return t, stampOf(fi), nil
}

var (
	errAuthNotJSON  = errors.New("is not the Codex CLI's JSON")
	errAuthNoTokens = errors.New("has neither OPENAI_API_KEY nor tokens.access_token (run `codex login`)")
)

// parseAuthJSON decodes auth.json's content.
func parseAuthJSON(data []byte) (tokens, error) {
	var f struct {
		AuthMode *string `json:"auth_mode"`
		APIKey   *string `json:"OPENAI_API_KEY"`
		Tokens   *struct {
			IDToken      *string `json:"id_token"`
			AccessToken  *string `json:"access_token"`
			RefreshToken *string `json:"refresh_token"`
			AccountID    *string `json:"account_id"`
		} `json:"tokens"`
		LastRefresh *string `json:"last_refresh"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		// Not %w: a JSON error may quote part of the file.
		return tokens{}, errAuthNotJSON
	}
	var t tokens
	apiKey := val(f.APIKey)
	if f.Tokens != nil {
		t.AccessToken, t.IDToken = val(f.Tokens.AccessToken), val(f.Tokens.IDToken)
		t.RefreshToken, t.AccountID = val(f.Tokens.RefreshToken), val(f.Tokens.AccountID)
	}
	if f.LastRefresh != nil {
		t.LastRefresh, _ = time.Parse(time.RFC3339Nano, val(f.LastRefresh))
	}
	switch {
	case t.AccessToken != "" && (apiKey == "" || strings.EqualFold(val(f.AuthMode), "chatgpt")):
		if t.AccountID == "" {
			t.AccountID = parseClaims(t.IDToken).Auth.AccountID
		}
	case apiKey != "":
		t = tokens{APIKey: apiKey}
	default:
		return tokens{}, errAuthNoTokens
	}
	return t, nil
}

// writeAuthFile writes t's tokens and last_refresh into the auth.json at path, keeping every other
// field of the file as it is now (the Codex CLI's own fields, and ones we do not know), and its
// file mode. It writes a temporary file in the same directory and renames it over the old one, so
// a reader (another worker, the Codex CLI) never sees half a file. A symbolic link is followed:
// the file it names is replaced.
func writeAuthFile(path string, t tokens) error {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	top := map[string]json.RawMessage{}
	if json.Unmarshal(old, &top) != nil {
		top = map[string]json.RawMessage{} // a mangled file is replaced whole
	}
	inner := map[string]json.RawMessage{}
	_ = json.Unmarshal(top["tokens"], &inner) // null or absent: a new object
	if inner == nil {
		inner = map[string]json.RawMessage{}
	}
	set := func(m map[string]json.RawMessage, k, v string) {
		if v != "" {
			m[k], _ = json.Marshal(v)
		}
	}
	set(inner, "id_token", t.IDToken)
	set(inner, "access_token", t.AccessToken)
	set(inner, "refresh_token", t.RefreshToken)
	if a, ok := inner["account_id"]; (!ok || string(a) == "null") && t.AccountID != "" {
		set(inner, "account_id", t.AccountID)
	}
	top["tokens"], _ = json.Marshal(inner)
	if !t.LastRefresh.IsZero() {
		set(top, "last_refresh", t.LastRefresh.UTC().Format(time.RFC3339Nano))
	}
	out, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		return err
	}
	return replaceFile(path, append(out, '\n'), fi.Mode().Perm())
}

// replaceFile atomically replaces path with data, with file mode perm.
func replaceFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // nothing is left to remove after the rename
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
