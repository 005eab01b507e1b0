package gateway

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestCompactGolden: the translation of POST /v1/responses/compact, for each
// testdata/compact/NAME.request.json: the generation the pool is asked for (NAME.pool.golden,
// the input with the compaction_trigger appended) and, from the pool's response
// NAME.response.json, the reply (NAME.reply.golden: the user messages kept and the compaction
// item, or the error). go test -run TestCompactGolden -update rewrites the golden files.
func TestCompactGolden(t *testing.T) {
	reqs, err := filepath.Glob("testdata/compact/*.request.json")
	if err != nil || len(reqs) == 0 {
		t.Fatalf("no testdata/compact/*.request.json (%v)", err)
	}
	for _, path := range reqs {
		name := strings.TrimSuffix(path, ".request.json")
		t.Run(filepath.Base(name), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			pb, input, a := compactRequest(raw)
			if a != nil {
				t.Fatalf("compactRequest: %d %s", a.Status, a.Message)
			}
			golden(t, name+".pool.golden", indent(t, pb.body))
			resp, err := os.ReadFile(name + ".response.json")
			if err != nil {
				t.Fatal(err)
			}
			reply, a := compactReply(input, resp)
			if a != nil {
				reply, _ = json.Marshal(map[string]any{"status": a.Status, "code": a.Code, "message": a.Message})
			}
			golden(t, name+".reply.golden", indent(t, reply))
		})
	}
}

// TestCompactRetainedBudget: the kept user messages are the newest that fit in the budget; an
// older one past it is dropped even when a still older one would fit.
func TestCompactRetainedBudget(t *testing.T) {
	msg := func(role, text string) json.RawMessage {
		return marshalRaw(map[string]any{"type": "message", "role": role, "content": []any{map[string]any{"type": "input_text", "text": text}}})
	}
	input := []json.RawMessage{msg("user", "old"), msg("user", strings.Repeat("x", 400)), msg("developer", "dev"), msg("user", strings.Repeat("y", 40))}
	got := compactRetained(input, 50) // 10 + 100 tokens: only the newest fits
	if len(got) != 1 || !bytes.Equal(got[0], input[3]) {
		t.Errorf("kept %s, want only the newest user message", got)
	}
	if got := compactRetained(input, 200); len(got) != 3 {
		t.Errorf("kept %d messages with room for all, want the 3 user messages", len(got))
	}
	ctx := msg("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>")
	if got := compactRetained([]json.RawMessage{ctx, input[0]}, 200); len(got) != 1 || !bytes.Equal(got[0], input[0]) {
		t.Errorf("kept %s, want the ask without the client's own context block", got)
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return append(buf.Bytes(), '\n')
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
