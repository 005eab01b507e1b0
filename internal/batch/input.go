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
	n        int    // 1-based line number in IN
	customID string // Batch API format; "" for a plain request line
	batchAPI bool
	body     []byte // the request body sent as the job
	id       string // job id
}

// readLines reads IN: one JSON object per non-empty line. Errors name the line.
func readLines(path, name string) ([]line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []line
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

// parseLine reads line n of batch name and derives its job id.
func parseLine(raw []byte, n int, name string) (line, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return line{}, errors.New("not a JSON object")
	}
	l := line{n: n}
	key := fmt.Sprintf("line %d", n)
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
	sum := sha256.Sum256([]byte(name + "\n" + key + "\n" + string(l.body)))
	l.id = "b" + hex.EncodeToString(sum[:20])
	return l, nil
}

// doneIDs returns the job ids OUT already has a line for (none when it does not exist).
func doneIDs(path string) (map[string]bool, error) {
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
		var l struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.ID != "" {
			done[l.ID] = true
		}
	}
	return done, sc.Err()
}
