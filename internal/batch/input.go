package batch

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// InputError is a fault of IN: a file that cannot be read or a line that is no request.
type InputError struct{ Err error }

func (e *InputError) Error() string { return "batch: " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// line is one input line.
type line struct {
	n        int    // 1-based line number in IN (for the output only: ids do not depend on it)
	customID string // Batch API format; "" for a plain request line
	batchAPI bool
	body     []byte // the request body sent as the job
	content  []byte // what its job ids derive from (see jobID)
	id       string // job id of this run: jobID of the first attempt OUT has no line for
}

// jobID is the line's job id at attempt a (0 for the first; a rerun gives a line that failed the
// next): a hash of the batch name, the line's custom_id and body, and which copy of that line it
// is in IN (see readLines). Neither IN's path nor the line's number is part of it, so a file
// moved or edited keeps the ids of the lines it still has.
func (l *line) jobID(attempt int) string {
	h := sha256.New()
	h.Write(l.content)
	if attempt > 0 {
		fmt.Fprintf(h, "\nretry %d", attempt)
	}
	return "b" + hex.EncodeToString(h.Sum(nil)[:20])
}

// readLines reads IN: one JSON object per non-empty line. Errors name the line. The k-th copy of
// a line (same custom_id and body) gets its own job: identical prompts are answered separately.
func readLines(path, name string) ([]line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []line
	copies := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		l, err := parseLine(raw, n, name)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if k := copies[string(l.content)]; k > 0 {
			copies[string(l.content)]++
			l.content = fmt.Appendf(l.content, "\ncopy %d", k)
			l.id = l.jobID(0)
		} else {
			copies[string(l.content)] = 1
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no requests", path)
	}
	return out, nil
}

// parseLine reads line n of batch name and derives its first job id.
func parseLine(raw []byte, n int, name string) (line, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return line{}, errors.New("not a JSON object")
	}
	l := line{n: n}
	key := "request"
	if body, ok := fields["body"]; ok && fields["custom_id"] != nil {
		if err := json.Unmarshal(fields["custom_id"], &l.customID); err != nil || l.customID == "" {
			return l, errors.New(`"custom_id" must be a non-empty string`)
		}
		if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
			return l, errors.New(`"body" must be a JSON object`)
		}
		l.batchAPI = true
		key = "custom_id " + l.customID
	}
	delete(fields, "stream") // batch results are one-shot bodies
	l.body, _ = json.Marshal(fields)
	l.content = []byte(name + "\n" + key + "\n" + string(l.body))
	l.id = l.jobID(0)
	return l, nil
}

// readOut returns the job ids OUT already has a line for, each with whether that line is a
// success (none when OUT does not exist).
func readOut(path string) (map[string]bool, error) {
	done := map[string]bool{}
	if path == "-" {
		return done, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for sc.Scan() {
		var l outLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.ID != "" {
			done[l.ID] = done[l.ID] || l.ok()
		}
	}
	return done, sc.Err()
}

// outLine is what readOut reads of a result line (see outputLine).
type outLine struct {
	ID       string          `json:"id"`
	CustomID *string         `json:"custom_id"` // set: the Batch API format
	Status   int             `json:"status"`    // the plain format's
	Error    json.RawMessage `json:"error"`     // the Batch API format's: null on success
}

func (l outLine) ok() bool {
	if l.CustomID != nil {
		return len(l.Error) == 0 || string(l.Error) == "null"
	}
	return l.Status == 200
}
