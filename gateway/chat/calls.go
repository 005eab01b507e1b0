package chat

import "strings"

// call is one function call of the answer, as its events arrive.
type call struct {
	index    int    // its index in delta.tool_calls; -1 until its first piece is sent
	callID   string // the id the client gets (the item id when the origin sends no call_id)
	name     string // upstream name; "" until an event names it
	held     strings.Builder
	streamed bool // argument deltas arrived
	finished bool
}

// calls finds a call by any of its aliases: output_index, item id, call_id.
type calls struct {
	byIndex map[int]*call
	byKey   map[string]*call
	list    []*call // in the order first seen
	next    int     // the next delta.tool_calls index
}

func (cs *calls) find(ev *event) *call {
	if ev.OutputIndex != nil {
		if c := cs.byIndex[*ev.OutputIndex]; c != nil {
			return c
		}
	}
	keys := []string{ev.ItemID}
	if ev.Item != nil {
		keys = append(keys, ev.Item.ID, ev.Item.CallID)
	}
	for _, k := range keys {
		if c := cs.byKey[k]; k != "" && c != nil {
			return c
		}
	}
	return nil
}

// see returns the call ev is about, registering it (and any alias it brings) when ev carries a
// function_call item; nil for an event about no known call.
func (cs *calls) see(ev *event) *call {
	c := cs.find(ev)
	it := ev.Item
	if it == nil || it.Type != typeFunction {
		return c
	}
	if c == nil {
		c = &call{index: -1}
		cs.list = append(cs.list, c)
	}
	if cs.byIndex == nil {
		cs.byIndex, cs.byKey = map[int]*call{}, map[string]*call{}
	}
	if ev.OutputIndex != nil {
		cs.byIndex[*ev.OutputIndex] = c
	}
	for _, k := range []string{it.ID, it.CallID} {
		if k != "" {
			cs.byKey[k] = c
		}
	}
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
