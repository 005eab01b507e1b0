package anthropic

import (
	"encoding/json"
	"strings"
)

// call is one function call as the stream tells it.
type call struct {
	callID, name string
	buf          strings.Builder // argument deltas that came before the block opened
	final        string          // the whole arguments, from a done event
	streamed     bool            // arguments went out as deltas
	opened, done bool
}

func (c *call) update(it *item) {
	if it == nil {
		return
	}
	if it.CallID != "" {
		c.callID = it.CallID
	}
	if it.Name != "" {
		c.name = it.Name
	}
	if it.Arguments != "" {
		c.final = it.Arguments
	}
}

// calls finds a call by any of its aliases (output index, item id, call id): events for one
// call may carry only some of them.
type calls struct {
	byKey  map[string]*call
	order  []*call
	active *call // the call whose tool block is open
}

// get returns the call e is about, made and registered under e's aliases if new.
func (cs *calls) get(e *event) *call {
	keys := e.aliases()
	var c *call
	for _, k := range keys {
		if c = cs.byKey[k]; c != nil {
			break
		}
	}
	if c == nil {
		c = &call{}
		cs.order = append(cs.order, c)
	}
	for _, k := range keys {
		cs.byKey[k] = c
	}
	return c
}

// next is the first named call whose block has not opened; a nameless call waits for its name.
func (cs *calls) next() *call {
	for _, c := range cs.order {
		if !c.opened && c.name != "" {
			return c
		}
	}
	return nil
}

// hydrate completes the calls from the terminal response's output, adding any never streamed.
func (cs *calls) hydrate(out []item) {
	for i := range out {
		it := &out[i]
		if it.Type != "function_call" {
			continue
		}
		e := event{Item: it}
		c := cs.get(&e)
		if c.final == "" || c.name == "" {
			c.update(it)
		}
		c.done = true
	}
}

func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
