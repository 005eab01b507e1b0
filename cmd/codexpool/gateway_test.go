package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// clearGatewayEnv unsets every setting the gateway reads (restored afterwards).
func clearGatewayEnv(t *testing.T) {
	t.Helper()
	for _, name := range settingNames(&gatewayConfig{}) {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
}

func TestGatewayConfig(t *testing.T) {
	keysFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte("# clients\nsk-one\n\n  sk-two  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyFile, []byte("# nobody\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      map[string]string
		wantErr  []string // substrings of the error; none = success
		wantKeys []string
	}{
		{name: "defaults"},
		{name: "key list", env: map[string]string{"CODEXPOOL_GATEWAY_KEYS": "sk-a, sk-b"}, wantKeys: []string{"sk-a", "sk-b"}},
		{name: "key file", env: map[string]string{"CODEXPOOL_GATEWAY_KEYS": "@" + keysFile}, wantKeys: []string{"sk-one", "sk-two"}},
		{name: "empty key file", env: map[string]string{"CODEXPOOL_GATEWAY_KEYS": "@" + emptyFile}, wantErr: []string{"CODEXPOOL_GATEWAY_KEYS", "no key"}},
		{name: "missing key file", env: map[string]string{"CODEXPOOL_GATEWAY_KEYS": "@/nonexistent/keys"}, wantErr: []string{"CODEXPOOL_GATEWAY_KEYS", "read keys file"}},
		{name: "key with a space", env: map[string]string{"CODEXPOOL_GATEWAY_KEYS": "@" + writeFile(t, "a b\n")}, wantErr: []string{"CODEXPOOL_GATEWAY_KEYS", "key 1"}},
		{name: "open without keys", env: map[string]string{"CODEXPOOL_GATEWAY_ADDR": "0.0.0.0:8080"},
			wantErr: []string{"CODEXPOOL_GATEWAY_ADDR=0.0.0.0:8080", "CODEXPOOL_GATEWAY_KEYS is empty"}},
		{name: "every interface without keys", env: map[string]string{"CODEXPOOL_GATEWAY_ADDR": ":8080"}, wantErr: []string{"not a loopback address"}},
		{name: "open with keys", env: map[string]string{"CODEXPOOL_GATEWAY_ADDR": "0.0.0.0:8080", "CODEXPOOL_GATEWAY_KEYS": "sk-a"}, wantKeys: []string{"sk-a"}},
		{name: "localhost without keys", env: map[string]string{"CODEXPOOL_GATEWAY_ADDR": "localhost:0"}},
		{name: "IPv6 loopback without keys", env: map[string]string{"CODEXPOOL_GATEWAY_ADDR": "[::1]:8080"}},
		{name: "bad addr", env: map[string]string{"CODEXPOOL_GATEWAY_ADDR": "8080"}, wantErr: []string{"CODEXPOOL_GATEWAY_ADDR", "host:port"}},
		{name: "bad keep-alive", env: map[string]string{"CODEXPOOL_GATEWAY_KEEPALIVE": "0s"}, wantErr: []string{"CODEXPOOL_GATEWAY_KEEPALIVE"}},
		{name: "bad timeout", env: map[string]string{"CODEXPOOL_GATEWAY_REQUEST_TIMEOUT": "-1s"}, wantErr: []string{"CODEXPOOL_GATEWAY_REQUEST_TIMEOUT"}},
		{name: "no models", env: map[string]string{"CODEXPOOL_GATEWAY_MODELS": " , "}, wantErr: []string{"CODEXPOOL_GATEWAY_MODELS"}},
		{name: "bad model map", env: map[string]string{"CODEXPOOL_GATEWAY_MODEL_MAP": "claude-*"}, wantErr: []string{"CODEXPOOL_GATEWAY_MODEL_MAP", "pattern=model"}},
		{name: "bad log level", env: map[string]string{"CODEXPOOL_LOG_LEVEL": "loud"}, wantErr: []string{"CODEXPOOL_LOG_LEVEL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearGatewayEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, keys, err := loadGatewayConfig(os.Getenv, "")
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				if !slices.Equal(keys, tt.wantKeys) {
					t.Errorf("got keys %q, want %q", keys, tt.wantKeys)
				}
				return
			}
			if err == nil {
				t.Fatalf("got success (%+v), want an error naming %q", c, tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "sk-") {
				t.Errorf("error %q quotes a key", err)
			}
		})
	}
	clearGatewayEnv(t)
	c, _, err := loadGatewayConfig(os.Getenv, "")
	if err != nil || c.Addr != "127.0.0.1:8080" || !slices.Equal(c.models(), []string{"gpt-5.1-codex"}) ||
		c.KeepAlive != 15*time.Second || c.RequestTimeout != 10*time.Minute {
		t.Errorf("defaults: got %+v (%v), want 127.0.0.1:8080, gpt-5.1-codex, 15s keep-alive, 10m timeout", c, err)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The gateway refuses to start open to the network without keys, before it connects anywhere.
func TestRunGatewayRefusesOpenWithoutKeys(t *testing.T) {
	clearGatewayEnv(t)
	t.Setenv("CODEXPOOL_GATEWAY_ADDR", "0.0.0.0:0")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := run(ctx, []string{"gateway"}, os.Getenv, strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "CODEXPOOL_GATEWAY_KEYS") || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a refusal naming CODEXPOOL_GATEWAY_KEYS", err)
	}
}
