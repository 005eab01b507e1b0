package anthropic

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/gateway/wire"
)

// TestCollector: a recorded stream collected for a non-streaming client gives one message.
func TestCollector(t *testing.T) {
	cases := []struct{ name, file, want string }{
		{"text", "text.jsonl", `"content":[{"text":"Hello, world.","type":"text"}]`},
		{"incomplete", "incomplete.jsonl", `"stop_reason":"max_tokens"`},
		{"tools from the done items", "parallel_tools.jsonl", `{"id":"call_b","input":{"path":"b.go"},"name":"` + longMCP + `","type":"tool_use"}],"id":"resp_par","model":"m","role":"assistant","stop_reason":"tool_use"`},
		{"reasoning", "reasoning.jsonl", `{"signature":"` + encodeSignature("rs_1", "gAAAAfinal") + `","thinking":"Thinking about it.\n\nDone.","type":"thinking"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var c Collector
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				c.Event(sc.Bytes())
			}
			if !c.Done() {
				t.Fatal("got no terminal event")
			}
			got := string(c.Message("m", wire.NewNames([]string{longMCP})))
			if !strings.Contains(got, strings.ReplaceAll(tc.want, "\n", `\n`)) {
				t.Errorf("got %s, want it to contain %s", got, tc.want)
			}
		})
	}
}
