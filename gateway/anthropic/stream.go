package anthropic

import (
	"encoding/json"

	"github.com/codexpool/codexpool/gateway/wire"
)

// Frame is one Anthropic SSE frame: "event: <Event>\ndata: <Data>\n\n".
type Frame struct {
	Event string
	Data  []byte
}

// Stream translates one response's pool events into Anthropic SSE frames. Blocks get one running
// index; one block is open at a time; tool_use blocks open only once their call is named, one at
// a time, other output meanwhile waits (design/clients.md §2). Not safe for concurrent use.
type Stream struct {
	model   string
	names   wire.Names
	started bool
	done    bool
	index   int
	open    openBlock
	sawTool bool

	text      map[string]bool   // message items whose text was streamed
	reasoning map[string]string // reasoning item id -> signature seen when added
	calls     calls             // function calls by every alias
	deferred  [][]byte          // events held while a tool block is open
	search    searchStream      // the web search waiting for its results (websearch.go)
	out       []Frame           // the frames of the event being handled
}

// openBlock is the content block being written.
type openBlock struct {
	kind string // "", "text", "thinking", "tool_use"
	key  string // the item it belongs to
}

// NewStream returns a Stream for a reply to a client that asked for model; names maps shortened
// tool names back (Translated.Names).
func NewStream(model string, names wire.Names) *Stream {
	return &Stream{model: model, names: names, text: map[string]bool{}, reasoning: map[string]string{}}
}

// Done reports whether the stream has ended (message_stop or an error frame was returned).
func (s *Stream) Done() bool { return s.done }

// Event translates one pool event and returns the frames to send, possibly none. Events after
// the end and events that are not JSON are ignored.
func (s *Stream) Event(ev []byte) []Frame {
	s.out = nil
	s.handle(ev)
	return s.out
}

func (s *Stream) handle(raw []byte) {
	var e wire.Event
	if s.done || json.Unmarshal(raw, &e) != nil {
		return
	}
	if e.Item == nil {
		// Item events without their item carry nothing to translate.
		e.Item = &wire.Item{}
	}
	if s.calls.active != nil && deferrable(&e) {
		s.deferred = append(s.deferred, append([]byte(nil), raw...))
		return
	}
	if s.search.holdsFor(&e) {
		s.search.held = append(s.search.held, append([]byte(nil), raw...))
		return
	}
	s.endSearchWait(&e, raw)
	switch e.Type {
	case "response.created":
		s.begin(e.Response)
	case "response.output_item.added":
		s.itemAdded(&e)
	case "response.output_text.delta":
		s.textDelta(&e)
	case "response.reasoning_summary_text.delta":
		s.thinkingDelta(&e)
	case "response.reasoning_summary_part.added":
		s.thinkingPart(&e)
	case "response.function_call_arguments.delta":
		s.argsDelta(&e)
	case "response.function_call_arguments.done":
		s.calls.get(&e).final = e.Arguments
	case "response.output_item.done":
		s.itemDone(&e, raw)
	case "response.completed", "response.incomplete", "response.done":
		s.finish(e.Type, e.Response)
	case "response.failed", "error":
		s.fail(failure(&e))
	}
}

// deferrable reports whether e waits while a tool block is open: output that is not a call's.
func deferrable(e *wire.Event) bool {
	switch e.Type {
	case "response.output_text.delta", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_part.added":
		return true
	case "response.output_item.added", "response.output_item.done":
		return e.Item != nil && e.Item.Type != "function_call"
	}
	return false
}

func (s *Stream) emit(typ string, v any) {
	s.out = append(s.out, Frame{Event: typ, Data: marshal(v)})
}

// begin sends message_start, once; r may be nil when the first event is not response.created.
func (s *Stream) begin(r *wire.Response) {
	if s.started {
		return
	}
	s.started = true
	id := "msg_codexpool"
	if r != nil && r.ID != "" {
		id = r.ID
	}
	s.emit("message_start", obj{"type": "message_start", "message": obj{
		"id": id, "type": "message", "role": "assistant", "model": s.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usageOut{},
	}})
}

func (s *Stream) startBlock(kind, key string, cb obj) {
	s.begin(nil)
	s.closeBlock()
	s.emit("content_block_start", obj{"type": "content_block_start", "index": s.index, "content_block": cb})
	s.open = openBlock{kind: kind, key: key}
}

func (s *Stream) delta(d obj) {
	s.emit("content_block_delta", obj{"type": "content_block_delta", "index": s.index, "delta": d})
}

// closeBlock stops the open block, if any; the next block takes the next index.
func (s *Stream) closeBlock() {
	if s.open.kind == "" {
		return
	}
	s.emit("content_block_stop", obj{"type": "content_block_stop", "index": s.index})
	s.index++
	s.open = openBlock{}
}

func (s *Stream) isOpen(kind, key string) bool { return s.open.kind == kind && s.open.key == key }

func (s *Stream) textDelta(e *wire.Event) {
	key := wire.ItemKey(e)
	if !s.isOpen("text", key) {
		s.startBlock("text", key, obj{"type": "text", "text": ""})
	}
	s.text[key] = true
	s.delta(obj{"type": "text_delta", "text": e.Delta})
}

func (s *Stream) thinkingDelta(e *wire.Event) {
	key := wire.ItemKey(e)
	if !s.isOpen("thinking", key) {
		s.startBlock("thinking", key, obj{"type": "thinking", "thinking": "", "signature": ""})
	}
	s.text[key] = true
	s.delta(obj{"type": "thinking_delta", "thinking": e.Delta})
}

// thinkingPart separates a reasoning item's summary parts with a blank line.
func (s *Stream) thinkingPart(e *wire.Event) {
	if s.isOpen("thinking", wire.ItemKey(e)) {
		s.delta(obj{"type": "thinking_delta", "thinking": "\n\n"})
	}
}

func (s *Stream) itemAdded(e *wire.Event) {
	switch e.Item.Type {
	case "function_call":
		s.calls.get(e).update(e.Item)
		s.openCall()
	case "reasoning":
		s.reasoning[wire.ItemKey(e)] = encodeSignature(e.Item.ID, e.Item.EncryptedContent)
	}
}

func (s *Stream) itemDone(e *wire.Event, raw []byte) {
	switch e.Item.Type {
	case wire.TypeWebSearchCall:
		s.searchDone(raw)
	case "message":
		s.messageDone(e)
	case "reasoning":
		s.reasoningDone(e)
	case "function_call":
		c := s.calls.get(e)
		c.update(e.Item)
		c.done = true
		if s.calls.active == c {
			s.closeCall()
			return
		}
		s.openCall()
	}
}

// messageDone closes the message's text block, or sends its whole text when none was streamed.
func (s *Stream) messageDone(e *wire.Event) {
	key := wire.ItemKey(e)
	if s.isOpen("text", key) {
		s.closeBlock()
		return
	}
	if t := messageText(e.Item); !s.text[key] && t != "" {
		s.startBlock("text", key, obj{"type": "text", "text": ""})
		s.delta(obj{"type": "text_delta", "text": t})
		s.closeBlock()
	}
}

// reasoningDone ends the item's thinking block with its signature; a reasoning item without
// streamed summary still gets a signature-only block, so the client replays it.
func (s *Stream) reasoningDone(e *wire.Event) {
	key := wire.ItemKey(e)
	sig := encodeSignature(e.Item.ID, e.Item.EncryptedContent)
	if sig == "" {
		sig = s.reasoning[key]
	}
	if !s.isOpen("thinking", key) {
		if sig == "" {
			return
		}
		s.startBlock("thinking", key, obj{"type": "thinking", "thinking": "", "signature": ""})
	}
	if sig != "" {
		s.delta(obj{"type": "signature_delta", "signature": sig})
	}
	s.closeBlock()
}

func (s *Stream) argsDelta(e *wire.Event) {
	c := s.calls.get(e)
	if s.calls.active == c {
		c.streamed = true
		s.delta(obj{"type": "input_json_delta", "partial_json": e.Delta})
		return
	}
	c.buf.WriteString(e.Delta)
}

// openCall opens the tool block of the first named call waiting, when no tool block is open.
func (s *Stream) openCall() {
	c := s.calls.next()
	if s.calls.active != nil || c == nil {
		return
	}
	s.calls.active, c.opened, s.sawTool = c, true, true
	s.startBlock("tool_use", c.callID, obj{"type": "tool_use", "id": c.callID,
		"name": s.names.Original(c.name), "input": obj{}})
	if c.buf.Len() > 0 {
		c.streamed = true
		s.delta(obj{"type": "input_json_delta", "partial_json": c.buf.String()})
	}
	if c.done {
		s.closeCall()
	}
}

// closeCall ends the active tool block (with the whole arguments if none were streamed), replays
// what waited for it and opens the next call.
func (s *Stream) closeCall() {
	c := s.calls.active
	if !c.streamed && c.final != "" {
		s.delta(obj{"type": "input_json_delta", "partial_json": c.final})
	}
	s.closeBlock()
	s.calls.active = nil
	held := s.deferred
	s.deferred = nil
	for _, ev := range held {
		s.handle(ev)
	}
	s.openCall()
}

// finish ends the message: calls the stream left unfinished are completed from the terminal
// response, every block is closed, then message_delta (stop_reason, usage) and message_stop.
func (s *Stream) finish(typ string, r *wire.Response) {
	s.begin(r)
	if r != nil {
		s.calls.hydrate(r.Output)
	}
	for s.calls.active != nil || s.calls.next() != nil {
		if s.calls.active == nil {
			s.openCall()
			continue
		}
		s.calls.active.done = true
		s.closeCall()
	}
	for len(s.deferred) > 0 || s.search.pending != nil {
		s.flushSearch(nil)
		held := s.deferred
		s.deferred = nil
		for _, ev := range held {
			s.handle(ev)
		}
	}
	s.closeBlock()
	var u *wire.Usage
	if r != nil {
		u = r.Usage
	}
	s.emit("message_delta", obj{"type": "message_delta",
		"delta": obj{"stop_reason": stopReason(s.sawTool, typ, r), "stop_sequence": nil}, "usage": mapUsage(u).withSearches(s.search.count)})
	s.emit("message_stop", obj{"type": "message_stop"})
	s.done = true
}

// fail ends the stream with an error frame.
func (s *Stream) fail(e *Error) {
	f := e.Frame()
	s.out = append(s.out, f)
	s.done = true
}
