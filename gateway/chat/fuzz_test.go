package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzStream feeds arbitrary event sequences (one event per line) to the translator: it must not
// panic, every chunk must encode, tool call indexes must start at 0 and grow by one, a call's
// first piece must carry its id and name, and nothing may follow the terminal chunks.
func FuzzStream(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.events")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"response.function_call_arguments.delta","output_index":0,"delta":"x"}`))
	req, err := Translate([]byte(goldenRequest))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewStream(req, "id", created)
		c := NewCompletion(req, "id", created)
		opened := 0
		for _, line := range bytes.Split(data, []byte("\n")) {
			wasDone := s.Done()
			chunks := s.Event(line)
			c.Event(line)
			if wasDone && len(chunks) > 0 {
				t.Fatalf("chunks after the terminal event: %+v", chunks)
			}
			for _, ch := range chunks {
				if _, err := json.Marshal(ch); err != nil {
					t.Fatalf("chunk does not encode: %v", err)
				}
				checkToolCalls(t, ch, &opened)
			}
		}
		if c.Done() != s.Done() {
			t.Fatalf("Completion.Done %v, Stream.Done %v", c.Done(), s.Done())
		}
		if got := len(c.Result().Choices[0].Message.ToolCalls); got != opened {
			t.Fatalf("completion has %d tool calls, the stream opened %d", got, opened)
		}
	})
}

func checkToolCalls(t *testing.T, ch Chunk, opened *int) {
	t.Helper()
	for _, choice := range ch.Choices {
		for _, tc := range choice.Delta.ToolCalls {
			switch {
			case tc.Index == *opened:
				if tc.Type != "function" || tc.Function.Name == "" {
					t.Fatalf("first piece of call %d: %+v, want type function and a name", tc.Index, tc)
				}
				*opened++
			case tc.Index > *opened || tc.Index < 0:
				t.Fatalf("tool call index %d, %d opened so far", tc.Index, *opened)
			case tc.ID != "" || tc.Function.Name != "":
				t.Fatalf("a later piece of call %d carries its id or name again: %+v", tc.Index, tc)
			}
		}
	}
}

// FuzzTranslate: any body is translated or refused with a *RequestError, never a panic, and a
// translation is a JSON object with a non-empty input array, as the pool requires.
func FuzzTranslate(f *testing.F) {
	f.Add([]byte(goldenRequest))
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f"}}]},{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"x"}]}],"tool_choice":{"type":"function","function":{"name":"f"}},"response_format":{"type":"json_schema","json_schema":{"name":"s"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := Translate(body)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *RequestError", err)
			}
			return
		}
		var out struct {
			Input []json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(req.Body, &out); err != nil || len(out.Input) == 0 {
			t.Fatalf("body %s: %v, want a JSON object with input items", req.Body, err)
		}
	})
}
