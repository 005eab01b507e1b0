package wire

// Calls finds a streamed function call by any of its aliases (Event.Aliases): the one call
// tracker of every dialect, each keeping its own per-call state in C. The zero value is ready.
type Calls[C any] struct {
	byKey map[string]*C
	list  []*C // in the order first seen
}

// Find returns the call e names by one of its aliases, or nil.
func (cs *Calls[C]) Find(e *Event) *C {
	for _, k := range Aliases(e) {
		if c := cs.byKey[k]; c != nil {
			return c
		}
	}
	return nil
}

// Get returns the call e names, made with fresh (and listed) when new, and registers every
// alias e brings for it.
func (cs *Calls[C]) Get(e *Event, fresh func() *C) *C {
	c := cs.Find(e)
	if c == nil {
		c = fresh()
		cs.list = append(cs.list, c)
	}
	cs.Alias(e, c)
	return c
}

// Alias registers e's aliases for c.
func (cs *Calls[C]) Alias(e *Event, c *C) {
	if cs.byKey == nil {
		cs.byKey = map[string]*C{}
	}
	for _, k := range Aliases(e) {
		cs.byKey[k] = c
	}
}

// List is the calls in the order first seen.
func (cs *Calls[C]) List() []*C { return cs.list }
