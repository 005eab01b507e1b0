package chat

import (
	"strings"

	"github.com/codexpool/codexpool/gateway/wire"
)

// call is one function call of the answer, as its events arrive.
type call struct {
	index    int    // its index in delta.tool_calls; -1 until its first piece is sent
	callID   string // the id the client gets (the item id when the origin sends no call_id)
	name     string // upstream name; "" until an event names it
	held     strings.Builder
	streamed bool // argument deltas arrived
	finished bool
}

// calls are the answer's function calls (wire.Calls finds one by any alias) and the next
// delta.tool_calls index.
type calls struct {
	wire.Calls[call]
	next int
}

// see returns the call ev is about, registering it (and any alias it brings) when ev carries a
// function_call item; nil for an event about no known call.
func (cs *calls) see(ev *wire.Event) *call {
	it := ev.Item
	if it == nil || it.Type != wire.TypeFunction {
		return cs.Find(ev)
	}
	c := cs.Get(ev, func() *call { return &call{index: -1} })
	if it.CallID != "" && c.index < 0 {
		c.callID = it.CallID
	} else if c.callID == "" {
		c.callID = it.ID
	}
	if c.name == "" {
		c.name = it.Name
	}
	return c
}
