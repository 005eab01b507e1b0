package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/gateway/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// longMCP is a tool name over 64 characters; the backend knows it as mcp__read_file.
const longMCP = "mcp__filesystem_server_with_a_name_long_enough_to_be_cut__read_file"

// TestStreamGolden runs recorded pool event sequences through a Stream and compares the SSE
// frames with testdata/<name>.golden (go test -run TestStreamGolden -update rewrites them).
func TestStreamGolden(t *testing.T) {
	cases := []struct {
		name string
		// checks are substrings the frames must contain, so a careless -update is caught.
		checks []string
	}{
		{"text", []string{`"text":"Hello"`, `"stop_reason":"end_turn"`, `"cache_read_input_tokens":100`, `"input_tokens":20`}},
		{"parallel_tools", []string{`"name":"Read"`, `"name":"` + longMCP + `"`, `"stop_reason":"tool_use"`}},
		{"late_name", []string{`"id":"call_late"`, `"name":"Bash"`, `"partial_json":"{\"command\":\"ls\"}"`, `"stop_reason":"tool_use"`}},
		{"reasoning", []string{`"thinking":"\n\n"`, `"type":"signature_delta"`, `"text":"42"`}},
		{"incomplete", []string{`"stop_reason":"max_tokens"`}},
		{"error_midstream", []string{"event: error", `"type":"overloaded_error"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { streamGolden(t, tc.name, tc.checks) })
	}
}

func runStream(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := NewStream("claude-sonnet-4-5", wire.NewNames([]string{longMCP}))
	var out bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		for _, fr := range s.Event(sc.Bytes()) {
			out.WriteString("event: " + fr.Event + "\ndata: " + string(fr.Data) + "\n\n")
		}
	}
	if !s.Done() {
		t.Error("the stream did not end")
	}
	return out.Bytes()
}

// checkFrames checks what every Anthropic client relies on: message_start first and once,
// blocks started and stopped in turn with indices 0, 1, 2..., deltas inside an open block,
// message_delta with a stop_reason before message_stop, nothing after the end.
func checkFrames(t *testing.T, sse []byte) {
	t.Helper()
	var frames []Frame
	for _, chunk := range strings.Split(strings.TrimSuffix(string(sse), "\n\n"), "\n\n") {
		if chunk == "" {
			continue
		}
		ev, data, _ := strings.Cut(chunk, "\ndata: ")
		frames = append(frames, Frame{Event: strings.TrimPrefix(ev, "event: "), Data: []byte(data)})
	}
	if err := validFrames(frames); err != "" {
		t.Errorf("%s in\n%s", err, sse)
	}
}

// validFrames returns what is wrong with a frame sequence, "" when nothing is.
func validFrames(frames []Frame) string {
	started, open, ended, next := false, false, false, 0
	for i, f := range frames {
		var d struct {
			Index *int `json:"index"`
			Delta struct {
				StopReason *string `json:"stop_reason"`
			} `json:"delta"`
		}
		if json.Unmarshal(f.Data, &d) != nil {
			return "frame " + strconv.Itoa(i) + " is not JSON"
		}
		if ended {
			return "a frame after the end"
		}
		switch f.Event {
		case "message_start":
			if started || i != 0 {
				return "message_start not first or twice"
			}
			started = true
		case "content_block_start":
			if open || d.Index == nil || *d.Index != next {
				return "content_block_start out of turn at frame " + strconv.Itoa(i)
			}
			open = true
		case "content_block_delta":
			if !open || d.Index == nil || *d.Index != next {
				return "a delta outside its block at frame " + strconv.Itoa(i)
			}
		case "content_block_stop":
			if !open || d.Index == nil || *d.Index != next {
				return "content_block_stop out of turn at frame " + strconv.Itoa(i)
			}
			open, next = false, next+1
		case "message_delta":
			if open || d.Delta.StopReason == nil {
				return "message_delta with a block open or without stop_reason"
			}
		case "message_stop", "error":
			ended = true
		}
	}
	return ""
}

// FuzzStream feeds arbitrary event sequences (one JSON event a line) to a Stream: it must not
// panic, every frame must be JSON, and the frame order must stay what clients accept.
func FuzzStream(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := NewStream("m", wire.Names{})
		var frames []Frame
		for line := range bytes.SplitSeq(in, []byte("\n")) {
			frames = append(frames, s.Event(line)...)
		}
		if err := validFrames(frames); err != "" {
			t.Errorf("%s: %q", err, in)
		}
	})
}

// streamGolden translates testdata/NAME.jsonl and compares the frames with testdata/NAME.golden
// (rewritten with -update); the frames must also hold each of checks and be in an order clients
// accept (checkFrames). It returns the frames.
func streamGolden(t *testing.T, name string, checks []string) []byte {
	t.Helper()
	got := runStream(t, filepath.Join("testdata", name+".jsonl"))
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
		t.Errorf("got frames\n%s\nwant\n%s", got, want)
	}
	for _, c := range checks {
		if !bytes.Contains(got, []byte(c)) {
			t.Errorf("frames lack %s", c)
		}
	}
	checkFrames(t, got)
	return got
}
