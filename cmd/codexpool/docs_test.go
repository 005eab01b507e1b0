package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// fencedBlock matches a fenced block of a Markdown page: its language and body.
var fencedBlock = regexp.MustCompile("(?ms)^```(\\w*)\n(.*?)^```$")

// docBlocks returns the bodies of a docs page's fenced blocks in lang.
func docBlocks(t *testing.T, page, lang string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("../../docs", page))
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range fencedBlock.FindAllStringSubmatch(string(raw), -1) {
		if m[1] == lang {
			bodies = append(bodies, m[2])
		}
	}
	return bodies
}

// TestDocsConfigBlocksLoad: the configuration and accounts files the docs pages show are read
// by the code that reads such files, without an error: the settings file by `codexpool config`,
// a worker's accounts file by worker.ParseAccounts, the simulator's by codextest.ParseAccounts.
func TestDocsConfigBlocksLoad(t *testing.T) {
	tests := []struct {
		name, page string
		index      int // which yaml block of the page
		load       func(t *testing.T, body string) error
	}{
		{name: "settings file", page: "configuration.md", index: 0, load: loadSettingsFile},
		{name: "worker accounts file", page: "configuration.md", index: 1, load: func(t *testing.T, body string) error {
			_, err := worker.ParseAccounts([]byte(body), func(string) string { return "a-token" })
			return err
		}},
		{name: "simulator accounts file", page: "simulator.md", index: 0, load: func(t *testing.T, body string) error {
			_, err := codextest.ParseAccounts([]byte(body))
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			blocks := docBlocks(t, tc.page, "yaml")
			if len(blocks) <= tc.index {
				t.Fatalf("docs/%s has %d yaml blocks, want block %d", tc.page, len(blocks), tc.index)
			}
			if err := tc.load(t, blocks[tc.index]); err != nil {
				t.Errorf("docs/%s yaml block %d: %v\n%s", tc.page, tc.index, err, blocks[tc.index])
			}
		})
	}
}

// loadSettingsFile runs `codexpool config --config FILE` on body, which must exit 0.
func loadSettingsFile(t *testing.T, body string) error {
	path := filepath.Join(t.TempDir(), "codexpool.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"config", "--config", path}, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		t.Logf("stderr: %s", stderr.String())
	}
	return err
}
