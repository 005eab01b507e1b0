package login

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jwt builds an unsigned JWT whose payload is claims.
func jwt(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + ".sig"
}

func TestResolveCredentials(t *testing.T) {
	idTok := jwt(`{"sub":"u","https://api.openai.com/auth":{"chatgpt_account_id":"acct-from-jwt","chatgpt_plan_type":"pro"}}`)
	for _, tc := range []struct {
		name         string
		envToken     string
		envAccount   string
		file         string // auth.json contents; "-" = no file
		wantToken    string
		wantAccount  string
		wantEnv      bool
		wantErr      string // substring
		wantNotExist bool
	}{
		{name: "env wins", envToken: "env-tok", envAccount: "env-acct", file: `{"OPENAI_API_KEY":"sk-file"}`,
			wantToken: "env-tok", wantAccount: "env-acct", wantEnv: true},
		{name: "env token without a file", envToken: "env-tok", file: "-", wantToken: "env-tok", wantEnv: true},
		{name: "api key", file: `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-file","tokens":null}`, wantToken: "sk-file"},
		{name: "api key with env account", envAccount: "env-acct", file: `{"OPENAI_API_KEY":"sk-file"}`,
			wantToken: "sk-file", wantAccount: "env-acct"},
		{name: "chatgpt tokens", file: `{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":"` + idTok +
			`","access_token":"at-1","refresh_token":"rt","account_id":"acct-1"},"last_refresh":"2026-08-14T09:54:11Z","extra":{"x":1}}`,
			wantToken: "at-1", wantAccount: "acct-1"},
		{name: "account id from id_token claim", file: `{"OPENAI_API_KEY":null,"tokens":{"id_token":"` + idTok +
			`","access_token":"at-1","account_id":null}}`, wantToken: "at-1", wantAccount: "acct-from-jwt"},
		{name: "env account beats the file", envAccount: "env-acct", file: `{"tokens":{"access_token":"at-1","account_id":"acct-1"}}`,
			wantToken: "at-1", wantAccount: "env-acct"},
		{name: "chatgpt mode prefers tokens over a stale key", file: `{"auth_mode":"chatgpt","OPENAI_API_KEY":"sk-old","tokens":{"access_token":"at-1"}}`,
			wantToken: "at-1"},
		{name: "null access token falls back to the key", file: `{"OPENAI_API_KEY":"sk-file","tokens":{"access_token":null,"account_id":"acct-1"}}`,
			wantToken: "sk-file"},
		{name: "bad id_token", file: `{"tokens":{"id_token":"not.a-jwt!","access_token":"at-1"}}`, wantToken: "at-1"},
		{name: "everything null", file: `{"OPENAI_API_KEY":null,"tokens":{"access_token":null}}`, wantErr: "neither OPENAI_API_KEY nor tokens.access_token"},
		{name: "empty key", file: `{"OPENAI_API_KEY":""}`, wantErr: "neither"},
		{name: "missing file", file: "-", wantErr: "does not exist", wantNotExist: true},
		{name: "not json", file: `{"OPENAI_API_KEY":"sk-leak`, wantErr: "not the Codex CLI's JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "auth.json")
			if tc.file != "-" {
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ResolveCredentials(tc.envToken, tc.envAccount, path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "sk-") || strings.Contains(err.Error(), "at-1") {
					t.Errorf("error %q holds a secret", err)
				}
				if tc.wantNotExist && !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("error %v does not wrap fs.ErrNotExist", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolveCredentials: %v", err)
			}
			if got.Token != tc.wantToken || got.AccountID != tc.wantAccount {
				t.Errorf("got token %q account %q, want %q %q", got.Token, got.AccountID, tc.wantToken, tc.wantAccount)
			}
			wantSource := path
			if tc.wantEnv {
				wantSource = "env"
			}
			if got.Source != wantSource {
				t.Errorf("Source %q, want %q", got.Source, wantSource)
			}
		})
	}
}

func TestResolveCredentialsExpandsHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".codex", "auth.json"), []byte(`{"OPENAI_API_KEY":"sk-home"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ResolveCredentials("", "", "~/.codex/auth.json")
	if err != nil || got.Token != "sk-home" || got.Source != filepath.Join(home, ".codex", "auth.json") {
		t.Fatalf("got %+v, %v; want sk-home from the expanded path", got, err)
	}
}

func TestResolveCredentialsNothingConfigured(t *testing.T) {
	_, err := ResolveCredentials("", "", "")
	if !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("got %v, want ErrNoCredentials", err)
	}
}

func TestCredentialsNeverPrintTheToken(t *testing.T) {
	c := Credentials{Token: "sk-very-secret", AccountID: "acct-1", Source: "env"}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("creds", "c", c)
	for _, s := range []string{c.String(), fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), logged.String()} {
		if strings.Contains(s, "sk-very-secret") {
			t.Errorf("%q prints the token", s)
		}
	}
	if !strings.Contains(c.String(), "env") {
		t.Errorf("String %q does not name the source", c.String())
	}
}
