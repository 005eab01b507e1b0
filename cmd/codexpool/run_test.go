package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestRun drives run the way main does, with a fake environment, for the paths that need no
// servers: help, version, and every kind of bad command line.
func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int // 0 = success
		wantOut    string
		wantErrOut string
		wantMsg    string
	}{
		{name: "no command", args: nil, wantCode: 2, wantErrOut: "Commands:", wantMsg: "no command given"},
		{name: "unknown command", args: []string{"frob"}, wantCode: 2, wantMsg: `unknown command "frob"`},
		{name: "help", args: []string{"help"}, wantOut: "bench"},
		{name: "version", args: []string{"version"}, wantOut: "codexpool "},
		{name: "worker help lists settings", args: []string{"worker", "--help"}, wantOut: "CODEXPOOL_MAX_INFLIGHT"},
		{name: "worker takes no arguments", args: []string{"worker", "extra"}, wantCode: 2, wantMsg: "takes no arguments"},
		{name: "ask needs a prompt", args: []string{"ask"}, wantCode: 2, wantMsg: "PROMPT is required"},
		{name: "ask empty prompt", args: []string{"ask", "  "}, wantCode: 2, wantMsg: "prompt is empty"},
		{name: "ask bad flag", args: []string{"ask", "--nope", "x"}, wantCode: 2, wantErrOut: "flag provided but not defined"},
		{name: "ask bad timeout", args: []string{"ask", "--timeout", "-1s", "x"}, wantCode: 2, wantMsg: "--timeout must be positive"},
		{name: "bench bad mode", args: []string{"bench", "--compare", "turbo"}, wantCode: 2, wantMsg: `unknown gate mode "turbo"`},
		{name: "bench bad concurrency", args: []string{"bench", "--concurrency", "0"}, wantCode: 2, wantMsg: "--concurrency"},
		{name: "bench bad schedule", args: []string{"bench", "--limit-schedule", "soon"}, wantCode: 2, wantMsg: "--limit-schedule"},
		{name: "bench account counts need accounts", args: []string{"bench", "--account-counts", "1,2"}, wantCode: 2, wantMsg: "--account-counts needs --accounts"},
		{name: "bench bad accounts file", args: []string{"bench", "--accounts", "/nonexistent/accounts.yaml"}, wantCode: 2, wantMsg: "--accounts"},
		{name: "bench speedup needs two modes", args: []string{"bench", "--min-speedup", "3"}, wantCode: 2, wantMsg: "two modes"},
		{name: "demo bad requests", args: []string{"demo", "--requests", "0"}, wantCode: 2, wantMsg: "at least 1"},
		{name: "sim help", args: []string{"sim", "--help"}, wantOut: "-upgrade-rate"},
		{name: "gateway help lists settings", args: []string{"gateway", "--help"}, wantOut: "CODEXPOOL_GATEWAY_KEYS"},
		{name: "gateway takes no arguments", args: []string{"gateway", "extra"}, wantCode: 2, wantMsg: "takes no arguments"},
		{name: "help names gateway", args: []string{"help"}, wantOut: "gateway  serve the OpenAI and Anthropic APIs"},
		{name: "--help is the top-level help", args: []string{"--help"}, wantOut: "Commands:"},
		{name: "help help is the top-level help", args: []string{"help", "help"}, wantOut: "Commands:"},
		{name: "help worker is worker --help", args: []string{"help", "worker"}, wantOut: "Usage: codexpool worker"},
		{name: "help worker lists the settings", args: []string{"help", "worker"}, wantOut: "CODEXPOOL_MAX_INFLIGHT"},
		{name: "help ask is ask --help", args: []string{"help", "ask"}, wantOut: "Usage: codexpool ask"},
		{name: "help sim is sim --help", args: []string{"help", "sim"}, wantOut: "-upgrade-rate"},
		{name: "help version prints the version", args: []string{"help", "version"}, wantOut: "codexpool "},
		{name: "help of an unknown command", args: []string{"help", "frob"}, wantCode: 2, wantMsg: `unknown command "frob"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			getenv := func(k string) string { return tt.env[k] }
			err := run(context.Background(), tt.args, getenv, strings.NewReader(""), &stdout, &stderr)
			var ee exitError
			switch {
			case tt.wantCode == 0 && err != nil:
				t.Fatalf("run(%q) = %v, want success", tt.args, err)
			case tt.wantCode != 0 && (!errors.As(err, &ee) || ee.code != tt.wantCode):
				t.Fatalf("run(%q) = %v, want exit code %d", tt.args, err, tt.wantCode)
			}
			if tt.wantMsg != "" && !strings.Contains(ee.msg, tt.wantMsg) {
				t.Errorf("message %q, want it to contain %q", ee.msg, tt.wantMsg)
			}
			if !strings.Contains(stdout.String(), tt.wantOut) {
				t.Errorf("stdout %q, want it to contain %q", stdout.String(), tt.wantOut)
			}
			if !strings.Contains(stderr.String(), tt.wantErrOut) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.wantErrOut)
			}
		})
	}
}
