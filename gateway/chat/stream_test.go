package chat

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// longTool is a tool name over 64 characters: it goes upstream as mcp__read_file.
const longTool = "mcp__filesystem_server_with_a_very_long_name_that_goes_past_the_limit__read_file"

// goldenRequest is the request every recorded event sequence answers.
var goldenRequest = `{"model":"gpt-5.1-codex","stream":true,"stream_options":{"include_usage":true},
	"messages":[{"role":"user","content":"hi"}],
	"tools":[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"get_time"}},
	{"type":"function","function":{"name":"` + longTool + `"}}]}`

var created = time.Unix(1700000000, 0)

// translate runs the events of testdata/name.events through a Stream and a Completion and
// returns the wire: one "data: " line per chunk, [DONE] or a note that the stream did not end,
// and the non-streamed answer.
func translate(t *testing.T, name string) []byte {
	t.Helper()
	req, err := Translate([]byte(goldenRequest))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join("testdata", name+".events"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := NewStream(req, "chatcmpl-test", created)
	c := NewCompletion(req, "chatcmpl-test", created)
	var out bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		for _, ch := range s.Event(sc.Bytes()) {
			out.WriteString("data: ")
			out.Write(ch.JSON())
			out.WriteString("\n")
		}
		c.Event(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if s.Done() {
		out.WriteString("data: [DONE]\n")
	} else {
		out.WriteString("(no terminal event: the pool's error ends the stream)\n")
	}
	if c.Done() != s.Done() {
		t.Errorf("Completion.Done %v, Stream.Done %v", c.Done(), s.Done())
	}
	out.WriteString("completion: ")
	out.Write(c.JSON())
	out.WriteString("\n")
	return out.Bytes()
}

func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.events")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded events: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".events")
		t.Run(name, func(t *testing.T) {
			got := translate(t, name)
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}
