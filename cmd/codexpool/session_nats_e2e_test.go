package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// convo builds a conversation's turns: each turn's new user item, and the whole conversation so
// far for a full resend.
type convo struct {
	items []json.RawMessage // every item so far: user messages and the answers' output items
}

func userItem(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": text}}})
	return b
}

// turn returns the request of the next turn: only the new item, continuing prev ("" = none).
func (c *convo) turn(text, prev string) []byte {
	c.items = append(c.items, userItem(text))
	m := map[string]any{"input": []json.RawMessage{userItem(text)}}
	if prev != "" {
		m["previous_response_id"] = prev
	}
	b, _ := json.Marshal(m)
	return b
}

// answered appends the output items of a response object.
func (c *convo) answered(t *testing.T, response json.RawMessage) string {
	t.Helper()
	var r struct {
		ID     string            `json:"id"`
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(response, &r); err != nil || r.ID == "" {
		t.Fatalf("bad response object %s: %v", response, err)
	}
	c.items = append(c.items, r.Output...)
	return r.ID
}

// full returns the whole conversation as one request, without previous_response_id.
func (c *convo) full() []byte {
	b, _ := json.Marshal(map[string]any{"input": c.items})
	return b
}

// TestE2ESessionOverNATS is the target 2: a 10-turn conversation with Codex-Session-Id
// over 4 worker processes runs on one worker and one upstream socket with only the new items
// per turn; when the owner stops, the next turn gets previous_response_not_found within 1 s and
// a full resend succeeds.
func TestE2ESessionOverNATS(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 8})
	procs := map[string]*proc{}
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("sess-w%d", i)
		procs[id] = c.startWorker(id)
	}
	sess := c.client.Session("")
	var cv convo
	prev, owner := "", ""
	for i := 1; i <= 10; i++ {
		r, err := sess.Generate(ctxT(t, 30*time.Second), cv.turn(fmt.Sprintf("turn %02d: go on", i), prev), nil)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if owner == "" {
			owner = r.Worker
		}
		if r.Worker != owner {
			t.Fatalf("turn %d answered by %s, want the owner %s", i, r.Worker, owner)
		}
		prev = cv.answered(t, r.Response)
	}
	turns := c.sim.Turns()
	if len(turns) != 10 {
		t.Fatalf("simulator got %d frames, want 10", len(turns))
	}
	for i, tr := range turns {
		if tr.Socket != turns[0].Socket || tr.Continued != (i > 0) {
			t.Errorf("turn %d: %+v, want it continued on socket %d", i+1, tr, turns[0].Socket)
		}
	}
	// The same conversation resent in full, for the figure.
	if _, err := c.client.Generate(ctxT(t, 30*time.Second), cv.full(), nil); err != nil {
		t.Fatal(err)
	}
	all := c.sim.Turns()
	fullBytes, lastBytes := all[len(all)-1].Bytes, turns[9].Bytes
	t.Logf("upstream bytes: turn 1 %d, turn 10 %d (continued, %d items seen); the same conversation resent in full %d (%.1fx)",
		turns[0].Bytes, lastBytes, turns[9].InputItems, fullBytes, float64(fullBytes)/float64(lastBytes))
	if lastBytes > turns[1].Bytes+16 || lastBytes*3 > fullBytes {
		t.Errorf("turn 10 sent %d bytes (turn 2: %d, full resend %d): want about turn 2's, far below the full resend", lastBytes, turns[1].Bytes, fullBytes)
	}

	procs[owner].stop(t, 30*time.Second)
	start := time.Now()
	_, err := sess.Generate(ctxT(t, 30*time.Second), cv.turn("turn 11: go on", prev), nil)
	took := time.Since(start)
	if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodePreviousResponseNotFound || e.Status != 400 {
		t.Fatalf("turn 11 after the owner stopped: %v, want 400 previous_response_not_found", err)
	}
	t.Logf("previous_response_not_found %v after the owner stopped", took)
	if took > time.Second {
		t.Errorf("previous_response_not_found after %v, want within 1 s", took)
	}
	r, err := sess.Generate(ctxT(t, 30*time.Second), cv.full(), nil)
	if err != nil || r.Worker == owner || r.Worker == "" {
		t.Fatalf("full resend: %v, %v; want an answer from another worker", r, err)
	}
	if sess.Worker() != r.Worker {
		t.Errorf("session owner %q after the resend, want %q", sess.Worker(), r.Worker)
	}
}
