package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestGatewayKeysFileSetting: CODEXPOOL_GATEWAY_KEYS_FILE is read and checked at start; a
// malformed file names the field and line and holds no secret; a keys file counts as keys for
// a non-loopback address.
func TestGatewayKeysFileSetting(t *testing.T) {
	good := writeFile(t, "keys:\n  - {name: alice, secret: sk-alice-secret-1, requests_per_minute: 3}\n")
	bad := writeFile(t, "keys:\n  - name: alice\n    secret: sk-alice-secret-1\n    requests_per_minute: -3\n")
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"file", map[string]string{"CODEXPOOL_GATEWAY_KEYS_FILE": good}, ""},
		{"file alone opens a non-loopback address", map[string]string{"CODEXPOOL_GATEWAY_KEYS_FILE": good, "CODEXPOOL_GATEWAY_ADDR": "0.0.0.0:8080"}, ""},
		{"malformed", map[string]string{"CODEXPOOL_GATEWAY_KEYS_FILE": bad}, "keys[0].requests_per_minute (line 4): want a whole number above 0"},
		{"missing", map[string]string{"CODEXPOOL_GATEWAY_KEYS_FILE": "/nonexistent/keys.yaml"}, "gateway: keys file: open /nonexistent/keys.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearGatewayEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, _, err := loadGatewayConfig(os.Getenv, "")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			case err != nil && strings.Contains(err.Error(), "sk-alice-secret-1"):
				t.Errorf("the error holds the secret: %v", err)
			}
		})
	}
}

// TestUsageCommandFlags: bad flags are refused before anything connects.
func TestUsageCommandFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"by", []string{"--by", "model"}, `--by must be key or account, got "model"`},
		{"since", []string{"--since", "-1h"}, "--since must be positive"},
		{"argument", []string{"extra"}, "usage takes no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"usage"}, tc.args...), func(string) string { return "" }, nil, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
