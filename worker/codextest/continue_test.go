package codextest

import (
	"encoding/json"
	"net/http"

	"github.com/gorilla/websocket"
	"testing"
)

// continueFrame is a response.create with previous_response_id (none when prev is "") and one
// new user message.
func continueFrame(prev, prompt string) []byte {
	var req map[string]any
	_ = json.Unmarshal(createFrame(prompt, nil), &req)
	if prev != "" {
		req["previous_response_id"] = prev
	}
	b, _ := json.Marshal(req)
	return b
}

// completedOn sends frame on c and returns its response.completed, failing the test without one.
func completedOn(t *testing.T, c *websocket.Conn, frame []byte) event {
	t.Helper()
	tr, evs := wsTrace(t, c, frame)
	last := evs[len(evs)-1]
	if last.typ() != evCompleted {
		t.Fatalf("trace %v, want it to end with response.completed", tr)
	}
	return last
}

func TestContinuationOnTheSameSocket(t *testing.T) {
	s := newServer(t, Options{Words: 3})
	c := mustDial(t, s)
	first := completedOn(t, c, continueFrame("", "alpha one"))
	id, _ := first.get("response.id").(string)
	second := completedOn(t, c, continueFrame(id, "beta two"))

	// The answer sees the whole conversation: both user messages.
	want := Answer("alpha onebeta two", 3)
	if got, _ := second.get("response.output.0.content.0.text").(string); got != want {
		t.Errorf("continued answer %q, want %q (the answer to the whole conversation)", got, want)
	}
	turns := s.Turns()
	if len(turns) != 2 {
		t.Fatalf("got %d turns, want 2", len(turns))
	}
	// Turn 2 saw turn 1's user message and answer plus its own message.
	if turns[1].Socket != turns[0].Socket || !turns[1].Continued || turns[1].InputItems != 3 {
		t.Errorf("turn 2 = %+v, want continued on socket %d with 3 input items", turns[1], turns[0].Socket)
	}
	if st := s.Stats(); st.Continued != 1 || st.FrameBytes != int64(turns[0].Bytes+turns[1].Bytes) {
		t.Errorf("stats continued=%d frame_bytes=%d, want 1 and %d", st.Continued, st.FrameBytes, turns[0].Bytes+turns[1].Bytes)
	}
}

func TestContinuationUnknownID(t *testing.T) {
	tests := []struct {
		name string
		prev func(t *testing.T, s *Server) string
	}{
		{"never made", func(*testing.T, *Server) string { return "resp_nope" }},
		{"made on another socket", func(t *testing.T, s *Server) string {
			ev := completedOn(t, mustDial(t, s), continueFrame("", "hello"))
			id, _ := ev.get("response.id").(string)
			return id
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, Options{Words: 2})
			prev := tt.prev(t, s)
			c := mustDial(t, s)
			tr, evs := wsTrace(t, c, continueFrame(prev, "next"))
			last := evs[len(evs)-1]
			if last.typ() != evError || last.get("error.code") != codePreviousNotFound || last.get("status") != 400.0 {
				t.Fatalf("trace %v, last %s; want a 400 error event previous_response_not_found", tr, last.raw)
			}
			// The socket stays usable: a full resend works on it.
			completedOn(t, c, continueFrame("", "next"))
			if got := s.Stats().PreviousNotFound; got != 1 {
				t.Errorf("previous_not_found = %d, want 1", got)
			}
		})
	}
}

func TestContinuationOverHTTPIsUnknown(t *testing.T) {
	s := newServer(t, Options{Words: 2})
	body, _ := json.Marshal(map[string]any{"model": "m", "input": "hi", "stream": true, "previous_response_id": "resp_1"})
	resp := post(t.Context(), t, httpClient(t), s.HTTPURL, bearer(""), body)
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusBadRequest || e.Error.Code != codePreviousNotFound {
		t.Errorf("got %d %q, want 400 %s", resp.StatusCode, e.Error.Code, codePreviousNotFound)
	}
}

func TestContinuationSendsOnlyNewItems(t *testing.T) {
	// The same 5-turn conversation continued and resent in full: the continued frames stay
	// small while the full ones grow, and the answers are the same.
	s := newServer(t, Options{Words: 4})
	cont, full := mustDial(t, s), mustDial(t, s)
	prev := ""
	var history []any
	for i, prompt := range []string{"turn 1", "turn 2", "turn 3", "turn 4", "turn 5"} {
		ev := completedOn(t, cont, continueFrame(prev, prompt))
		prev, _ = ev.get("response.id").(string)
		history = append(history, map[string]any{"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": prompt}}})
		var req map[string]any
		_ = json.Unmarshal(createFrame("", nil), &req)
		req["input"] = history
		b, _ := json.Marshal(req)
		fev := completedOn(t, full, b)
		history = append(history, fev.get("response.output.0"))
		if a, b := ev.get("response.output.0.content.0.text"), fev.get("response.output.0.content.0.text"); a != b {
			t.Errorf("turn %d: continued answer %v, full resend %v; want the same", i+1, a, b)
		}
	}
	turns := s.Turns()
	lastCont, lastFull := turns[len(turns)-2], turns[len(turns)-1]
	if lastCont.InputItems != lastFull.InputItems || lastCont.Bytes*2 > lastFull.Bytes {
		t.Errorf("turn 5: continued %+v, full %+v; want the same items in under half the bytes", lastCont, lastFull)
	}
	if turns[2].Bytes != lastCont.Bytes {
		t.Errorf("continued frames of turns 2 and 5: %d and %d bytes, want the same size (only the new item)", turns[2].Bytes, lastCont.Bytes)
	}
}
