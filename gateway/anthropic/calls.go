package anthropic

import (
	"strings"

	"github.com/codexpool/codexpool/gateway/wire"
)

// call is one function call as the stream tells it.
type call struct {
	callID, name string
	buf          strings.Builder // argument deltas that came before the block opened
	final        string          // the whole arguments, from a done event
	streamed     bool            // arguments went out as deltas
	opened, done bool
}

func (c *call) update(it *wire.Item) {
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

// calls are the stream's function calls (wire.Calls finds one by any alias) and the one whose
// tool block is open.
type calls struct {
	wire.Calls[call]
	active *call
}

// get returns the call e is about, made and registered under e's aliases if new.
func (cs *calls) get(e *wire.Event) *call { return cs.Get(e, func() *call { return &call{} }) }

// next is the first named call whose block has not opened; a nameless call waits for its name.
func (cs *calls) next() *call {
	for _, c := range cs.List() {
		if !c.opened && c.name != "" {
			return c
		}
	}
	return nil
}

// hydrate completes the calls from the terminal response's output, adding any never streamed.
func (cs *calls) hydrate(out []wire.Item) {
	for i := range out {
		it := &out[i]
		if it.Type != wire.TypeFunction {
			continue
		}
		c := cs.get(&wire.Event{Item: it})
		if c.final == "" || c.name == "" {
			c.update(it)
		}
		c.done = true
	}
}
