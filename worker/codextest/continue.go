package codextest

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
)

// Connection-local continuation, as the Codex backend does it: every socket remembers the
// responses it made (their id -> the whole conversation so far: the input they saw plus their
// output items). A response.create with previous_response_id known on its socket continues from
// it: the conversation is that history followed by the new input, and the answer and the prompt
// cache see all of it. An id the socket does not know (another socket made it, the socket is
// new, or it was forgotten) is answered with the origin's previous_response_not_found error;
// HTTP streaming keeps no state, so there every previous_response_id is unknown.

const (
	// historyResponses is how many responses a socket remembers, the oldest forgotten first.
	historyResponses = 64
	// turnLogSize is how many turns Server.Turns keeps, the oldest forgotten first.
	turnLogSize = 4096
	// codePreviousNotFound is the origin's error code for an unknown previous_response_id.
	codePreviousNotFound = "previous_response_not_found"
)

// Turn is one response.create a socket received, as Server.Turns and GET ControlURL+"/turns"
// report it: what a client sent upstream, so tests can measure what continuation saves.
type Turn struct {
	// Socket numbers the upgraded socket the frame came on (1, 2, ... in upgrade order).
	Socket uint64 `json:"socket"`
	// Bytes is the frame's size as received.
	Bytes int `json:"bytes"`
	// PreviousResponseID is the frame's previous_response_id; "" for none.
	PreviousResponseID string `json:"previous_response_id,omitempty"`
	// Continued is true when the socket knew PreviousResponseID and continued from it.
	Continued bool `json:"continued"`
	// InputItems counts the items of the conversation the response saw: the history it continued
	// plus the frame's input.
	InputItems int `json:"input_items"`
}

// history is one socket's memory of its responses. It lives on the socket's run goroutine.
type history struct {
	convs map[string]json.RawMessage // response id -> the conversation up to and including it
	order []string                   // ids, oldest first
}

func (h *history) lookup(id string) (json.RawMessage, bool) {
	c, ok := h.convs[id]
	return c, ok
}

// remember keeps conv as the conversation up to response id.
func (h *history) remember(id string, conv json.RawMessage) {
	if h.convs == nil {
		h.convs = map[string]json.RawMessage{}
	}
	if len(h.order) >= historyResponses {
		delete(h.convs, h.order[0])
		h.order = h.order[1:]
	}
	h.convs[id] = conv
	h.order = append(h.order, id)
}

// continueFrom sets req.Input to the conversation req continues on this socket and reports the
// number of items in it, or returns the previous_response_not_found event.
func (sc *session) continueFrom(req *genRequest) (int, *errorEvent) {
	items, err := inputItems(req.Input)
	if err != nil {
		return 0, badRequestEvent(err.Error())
	}
	if req.PreviousResponseID == "" {
		return len(items), nil
	}
	prev, ok := sc.hist.lookup(req.PreviousResponseID)
	if !ok {
		sc.s.c.previousNotFound.Add(1)
		return 0, previousNotFoundEvent(req.PreviousResponseID)
	}
	var conv []json.RawMessage
	_ = json.Unmarshal(prev, &conv) // remember stores arrays only
	conv = append(conv, items...)
	req.Input, _ = json.Marshal(conv)
	sc.s.c.continued.Add(1)
	return len(conv), nil
}

// rememberResponse keeps the conversation up to the response that re completes: g's input and
// re's output items.
func (sc *session) rememberResponse(g *generation, re *responseEvent) {
	conv, _ := inputItems(g.input)
	for _, it := range re.Response.Output {
		b, err := json.Marshal(it)
		if err == nil {
			conv = append(conv, b)
		}
	}
	b, _ := json.Marshal(conv)
	sc.hist.remember(re.Response.ID, b)
}

// inputItems reads an input as items: a string is one user message, absent is none.
func inputItems(input json.RawMessage) ([]json.RawMessage, error) {
	if len(input) == 0 || string(input) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(input, &s) == nil {
		msg, _ := json.Marshal(map[string]any{"type": "message", "role": "user",
			"content": []map[string]string{{"type": "input_text", "text": s}}})
		return []json.RawMessage{msg}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, fmt.Errorf("input is neither a string nor an array of items")
	}
	return items, nil
}

// previousNotFoundEvent is the origin's answer to an unknown previous_response_id.
func previousNotFoundEvent(id string) *errorEvent {
	ev := invalidRequestEvent(codePreviousNotFound, fmt.Sprintf("Previous response with id '%s' not found.", id))
	ev.Error.Param = "previous_response_id"
	return ev
}

// turnLog is the bounded record of the turns every socket received.
type turnLog struct {
	sockets atomic.Uint64 // socket numbers given out

	mu    sync.Mutex
	turns []Turn // oldest first; len <= turnLogSize
}

func (l *turnLog) add(t Turn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.turns) >= turnLogSize {
		l.turns = append(l.turns[:0], l.turns[1:]...)
	}
	l.turns = append(l.turns, t)
}

func (l *turnLog) read() []Turn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Turn(nil), l.turns...)
}

func (l *turnLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turns = nil
}

// Turns returns the response.create frames received over WebSockets since start or ResetStats,
// oldest first (at most the last 4096).
func (s *Server) Turns() []Turn { return s.turns.read() }
