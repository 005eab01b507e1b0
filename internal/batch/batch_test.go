package batch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// TestParseLine: both input formats, the errors that name what is wrong, and job ids that
// depend on the batch name, the line's key and its body only ("stream" dropped).
func TestParseLine(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		n        int
		wantBody string
		wantAPI  bool
		wantErr  string
	}{
		{name: "plain", raw: `{"input":"hi","stream":true}`, n: 3, wantBody: `{"input":"hi"}`},
		// The body is decoded into the line's own fields, so the job carries them too (as
		// before the move into this package; job ids of earlier runs depend on it).
		{name: "batch api", raw: `{"custom_id":"a","method":"POST","body":{"input":"hi"}}`, n: 1,
			wantBody: `{"body":{"input":"hi"},"custom_id":"a","input":"hi","method":"POST"}`, wantAPI: true},
		{name: "not an object", raw: `[1]`, wantErr: "not a JSON object"},
		{name: "empty custom_id", raw: `{"custom_id":"","body":{}}`, wantErr: `"custom_id" must be a non-empty string`},
		{name: "body not an object", raw: `{"custom_id":"a","body":"x"}`, wantErr: `"body" must be a JSON object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := parseLine([]byte(tt.raw), tt.n, "B")
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(l.body) != tt.wantBody || l.batchAPI != tt.wantAPI || l.n != tt.n {
				t.Errorf("got body %s, batchAPI %v, n %d; want %s, %v, %d", l.body, l.batchAPI, l.n, tt.wantBody, tt.wantAPI, tt.n)
			}
			if len(l.id) != 41 || l.id[0] != 'b' {
				t.Errorf("got id %q, want b and 40 hex digits", l.id)
			}
			moved, _ := parseLine([]byte(tt.raw), tt.n+7, "B")
			other, _ := parseLine([]byte(tt.raw), tt.n, "C")
			if moved.id != l.id || other.id == l.id {
				t.Errorf("ids %s (on another line %s, other batch %s): want the same id on another line and another for another batch", l.id, moved.id, other.id)
			}
			if retry := l.jobID(1); retry == l.id || retry != moved.jobID(1) || len(retry) != 41 {
				t.Errorf("retry id %s of %s: want another id, the same for the same line", retry, l.id)
			}
		})
	}
}

// TestOutputLine: the Batch API output format for Batch API lines, the plain one otherwise,
// each with the answer or the error.
func TestOutputLine(t *testing.T) {
	fail := schemas.Errorf(schemas.CodeInvalidRequest, "no input")
	ok := &client.Reply{Response: []byte(`{"output_text":"x"}`)}
	tests := []struct {
		name string
		l    line
		r    *client.Reply
		err  error
		want string
	}{
		{name: "plain ok", l: line{n: 2, id: "b1"}, r: ok,
			want: `{"id":"b1","line":2,"response":{"output_text":"x"},"status":200}`},
		{name: "plain error", l: line{n: 2, id: "b1"}, err: fail,
			want: `{"error":{"code":"invalid_request","message":"no input","status":400},"id":"b1","line":2,"status":400}`},
		{name: "batch api ok", l: line{id: "b1", customID: "c", batchAPI: true}, r: ok,
			want: `{"custom_id":"c","error":null,"id":"b1","response":{"body":{"output_text":"x"},"request_id":"b1","status_code":200}}`},
		{name: "batch api error", l: line{id: "b1", customID: "c", batchAPI: true}, err: fail,
			want: `{"custom_id":"c","error":{"code":"invalid_request","message":"no input"},"id":"b1","response":{"body":{"error":{"code":"invalid_request","message":"no input","status":400}},"request_id":"b1","status_code":400}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(outputLine(&tt.l, tt.r, tt.err)); got != tt.want {
				t.Errorf("got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestLoad: identical lines are separate jobs, lines OUT already has are not pending, and
// faults of IN are InputErrors that name the line.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	write(t, in, "{\"input\":\"a\"}\n\n{\"input\":\"b\"}\n{\"input\":\"b\"}\n")
	b, err := Load(Config{In: in, Name: "N"})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.byID) != 3 || len(b.pending) != 3 || b.cfg.Out != filepath.Join(dir, "in.out.jsonl") {
		t.Fatalf("got %d jobs, %d pending, out %s; want 3, 3, in.out.jsonl", len(b.byID), len(b.pending), b.cfg.Out)
	}
	write(t, b.cfg.Out, string(outputLine(b.pending[0], &client.Reply{Response: []byte(`{}`)}, nil))+"\n")
	if b, err = Load(Config{In: in, Name: "N"}); err != nil {
		t.Fatal(err)
	}
	if b.already != 1 || len(b.pending) != 2 || b.pending[0].n != 3 {
		t.Errorf("rerun: %d already, %d pending (first line %d); want 1, 2, line 3", b.already, len(b.pending), b.pending[0].n)
	}
	write(t, in, "{\"input\":\"a\"}\nnot json\n")
	_, err = Load(Config{In: in})
	var ie *InputError
	if !errors.As(err, &ie) || !strings.HasSuffix(err.Error(), "in.jsonl:2: not a JSON object") {
		t.Errorf("got %v, want an InputError naming in.jsonl:2", err)
	}
	write(t, in, "\n")
	if _, err = Load(Config{In: in}); !errors.As(err, &ie) || !strings.Contains(err.Error(), "has no requests") {
		t.Errorf("got %v, want an InputError: no requests", err)
	}
}

// TestLoadResume: what a rerun submits. Ids follow the lines' content, so a file moved, with a
// line inserted above the others, submits only the new line; a failed line is submitted again
// under a new id (each rerun the next), unless KeepFailed.
func TestLoadResume(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "first.jsonl")
	out := filepath.Join(dir, "out.jsonl")
	lines := []string{`{"input":"a"}`, `{"input":"b"}`, `{"input":"b"}`, `{"custom_id":"x","body":{"input":"c"}}`}
	write(t, first, strings.Join(lines, "\n")+"\n")
	b, err := Load(Config{In: first, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	fail := schemas.Errorf(schemas.CodeUpstreamError, "refused")
	var results []string
	for i, l := range b.pending {
		var err error
		if i == 2 || i == 3 { // the second "b" and the Batch API line fail
			err = fail
		}
		results = append(results, string(outputLine(l, &client.Reply{Response: []byte(`{}`)}, err)))
	}
	write(t, out, strings.Join(results, "\n")+"\n")
	moved := filepath.Join(t.TempDir(), "moved.jsonl")
	write(t, moved, `{"input":"new"}`+"\n"+strings.Join(lines, "\n")+"\n")

	tests := []struct {
		name        string
		keepFailed  bool
		wantPending []int // line numbers in moved.jsonl
		wantKept    int
	}{
		{name: "failed lines retried", wantPending: []int{1, 4, 5}},
		{name: "failed lines kept", keepFailed: true, wantPending: []int{1}, wantKept: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Load(Config{In: moved, Out: out, KeepFailed: tt.keepFailed})
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, l := range b.pending {
				got = append(got, l.n)
			}
			if !slices.Equal(got, tt.wantPending) || b.kept != tt.wantKept || b.already != 4-len(got)+1 {
				t.Errorf("pending lines %v, %d already (%d failures kept); want %v, %d (%d)", got, b.already, b.kept, tt.wantPending, 4-len(tt.wantPending)+1, tt.wantKept)
			}
			for _, l := range b.pending[1:] {
				if l.id != l.jobID(1) {
					t.Errorf("line %d resubmitted as %s, want its second attempt's id %s", l.n, l.id, l.jobID(1))
				}
			}
		})
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
