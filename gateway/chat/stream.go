package chat

import (
	"time"

	"github.com/codexpool/codexpool/gateway/wire"
)

// Stream translates one answer's pool events into chat.completion.chunk objects. Make one per
// request with NewStream and call Event with each event in order. It is not safe for concurrent
// use.
type Stream struct {
	head         Chunk // id, object, created, model of every chunk
	includeUsage bool
	names        wire.Names

	started  bool            // the role chunk was sent
	done     bool            // the terminal event was translated
	texted   map[string]bool // message items whose text was sent
	calls    calls
	toolUsed bool // a named call was sent
	out      []Chunk
}

// NewStream returns the translator of req's answer; its chunks carry id and created. When req
// names no model, chunks carry the one the pool reports.
func NewStream(req *Request, id string, created time.Time) *Stream {
	return &Stream{
		head:         Chunk{ID: id, Object: "chat.completion.chunk", Created: created.Unix(), Model: req.Model},
		includeUsage: req.IncludeUsage,
		names:        req.names,
		texted:       map[string]bool{},
	}
}

// Done reports whether the answer's terminal event (response.completed or response.incomplete)
// was translated: the stream then ends with "data: [DONE]", and a pool error after it (the pool
// reports an incomplete response as one) is not the client's.
func (s *Stream) Done() bool { return s.done }

// Event translates one pool event. The chunks returned are valid until the next call. Events
// after the terminal one, and events that are not JSON objects, give none.
func (s *Stream) Event(b []byte) []Chunk {
	s.out = s.out[:0]
	if s.done {
		return nil
	}
	ev, ok := wire.ParseEvent(b)
	if !ok {
		return nil
	}
	switch ev.Type {
	case wire.EventCreated:
		if s.head.Model == "" && ev.Response != nil {
			s.head.Model = ev.Response.Model
		}
		s.role()
	case wire.EventTextDelta:
		s.texted[ev.ItemID] = true
		s.content(ev.Delta)
	case wire.EventRefusal:
		s.texted[ev.ItemID] = true
		s.refusal(ev.Delta)
	case wire.EventItemAdded:
		if c := s.calls.see(&ev); c != nil && c.name != "" {
			s.open(c)
		}
	case wire.EventArgsDelta:
		s.argsDelta(s.calls.Find(&ev), ev.Delta)
	case wire.EventArgsDone:
		if c := s.calls.Find(&ev); c != nil {
			if c.name == "" {
				c.name = ev.Name
			}
			s.finish(c, ev.Arguments)
		}
	case wire.EventItemDone:
		s.itemDone(&ev)
	case wire.EventCompleted, wire.EventIncomplete:
		s.terminal(&ev)
	}
	return s.out
}

func (s *Stream) emit(d Delta, finish *string) {
	c := s.head
	c.Choices = []Choice{{Delta: d, FinishReason: finish}}
	s.out = append(s.out, c)
}

// role sends the first chunk, once: role assistant and empty content.
func (s *Stream) role() {
	if s.started {
		return
	}
	s.started = true
	empty := ""
	s.emit(Delta{Role: "assistant", Content: &empty}, nil)
}

func (s *Stream) content(text string) {
	s.role()
	if text != "" {
		s.emit(Delta{Content: &text}, nil)
	}
}

func (s *Stream) refusal(text string) {
	s.role()
	if text != "" {
		s.emit(Delta{Refusal: &text}, nil)
	}
}

// open sends a call's first piece (index, id, type, name) and the arguments held until then.
func (s *Stream) open(c *call) {
	if c.index >= 0 {
		return
	}
	s.role()
	c.index = s.calls.next
	s.calls.next++
	s.toolUsed = true
	s.emit(Delta{ToolCalls: []ToolCallDelta{{Index: c.index, ID: c.callID, Type: "function",
		Function: FunctionDelta{Name: s.names.Original(c.name)}}}}, nil)
	if c.held.Len() > 0 {
		s.args(c, c.held.String())
		c.held.Reset()
	}
}

func (s *Stream) args(c *call, a string) {
	s.emit(Delta{ToolCalls: []ToolCallDelta{{Index: c.index, Function: FunctionDelta{Arguments: a}}}}, nil)
}

// argsDelta sends a piece of a call's arguments, or holds it while the call has no name.
func (s *Stream) argsDelta(c *call, a string) {
	if c == nil || c.finished || a == "" {
		return
	}
	c.streamed = true
	if c.index < 0 {
		c.held.WriteString(a)
		return
	}
	s.args(c, a)
}

// finish sends what is left of a named call: its first piece if not sent, and the whole
// arguments if none were streamed. A call still without a name is left for a later event.
func (s *Stream) finish(c *call, arguments string) {
	if c.finished || c.name == "" {
		return
	}
	s.open(c)
	if !c.streamed && arguments != "" {
		s.args(c, arguments)
	}
	c.finished = true
}

// itemDone completes a function call, or sends a message's text when none was streamed.
func (s *Stream) itemDone(ev *wire.Event) {
	it := ev.Item
	if it == nil {
		return
	}
	switch it.Type {
	case wire.TypeFunction:
		s.finish(s.calls.see(ev), it.Arguments)
	case wire.TypeMessage:
		if s.texted[it.ID] {
			return
		}
		s.texted[it.ID] = true
		for _, p := range it.Content {
			switch p.Type {
			case "output_text":
				s.content(p.Text)
			case "refusal":
				s.refusal(p.Refusal)
			}
		}
	}
}

// terminal fills in from the response's output what was not streamed, then sends the finish
// chunk and, when asked, the usage chunk.
func (s *Stream) terminal(ev *wire.Event) {
	r := ev.Response
	if r == nil {
		r = &wire.Response{}
	}
	for i := range r.Output {
		idx := i
		s.itemDone(&wire.Event{OutputIndex: &idx, Item: &r.Output[i]})
	}
	s.role()
	reason := s.finishReason(ev.Type, r)
	s.emit(Delta{}, &reason)
	if s.includeUsage {
		u := wire.Usage{}
		if r.Usage != nil {
			u = *r.Usage
		}
		c := s.head
		c.Choices = []Choice{}
		c.Usage = chatUsage(u)
		s.out = append(s.out, c)
	}
	s.done = true
}

func (s *Stream) finishReason(typ string, r *wire.Response) string {
	switch {
	case s.toolUsed:
		return FinishToolCalls
	case typ == wire.EventIncomplete || r.Status == wire.StatusPartial:
		if r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "content_filter" {
			return FinishContentFilter
		}
		return FinishLength
	}
	return FinishStop
}
