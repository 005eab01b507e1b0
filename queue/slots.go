package queue

import (
	"context"
	"sync"
	"sync/atomic"
)

// slots is the in-flight cap that requests and jobs share: one token per running generation.
//
// The jobs pull loop waits for a job inside a slot it reserved (reserve), so that a job that
// arrives always has a slot to run in. While it waits, that slot is stealable: a request that
// finds every other slot taken takes it (acquire) and the wait is cancelled, so an idle worker with
// jobs on still serves MaxInflight requests. The loop learns whether its slot was stolen from
// beginWait and endWait; a stolen slot belongs to the request.
//
// Its methods are safe for concurrent use; there is at most one pull loop.
type slots struct {
	tokens chan struct{} // one token per slot taken
	freed  chan struct{} // wakes a reserve that waits for a slot

	// mu makes the pull loop's reservation of a slot and its stealable state one step for an
	// acquire that finds every slot taken, so a request never finds every slot held by a loop
	// that has reserved one but not yet said so.
	mu         sync.Mutex
	state      atomic.Int32                       // pullIdle, pullWaiting or pullStolen
	cancelWait atomic.Pointer[context.CancelFunc] // ends the pull loop's wait
}

// States of the pull loop's slot.
const (
	pullIdle    int32 = iota // the loop holds no stealable slot
	pullWaiting              // the loop waits for a job in a slot it reserved: stealable
	pullStolen               // a request took the loop's slot while it waited
)

func newSlots(n int) *slots {
	return &slots{tokens: make(chan struct{}, n), freed: make(chan struct{}, 1)}
}

// tryAcquire takes a free slot without blocking.
func (p *slots) tryAcquire() bool {
	select {
	case p.tokens <- struct{}{}:
		return true
	default:
		return false
	}
}

// acquire takes a slot for a request without blocking: a free one, or the one the pull loop
// waits in.
func (p *slots) acquire() bool {
	if p.tryAcquire() {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tryAcquire() || p.steal()
}

// steal takes the slot the pull loop waits in, if it waits, and cancels its wait.
func (p *slots) steal() bool {
	if !p.state.CompareAndSwap(pullWaiting, pullStolen) {
		return false
	}
	if c := p.cancelWait.Load(); c != nil {
		(*c)()
	}
	return true
}

// acquireWait takes a free slot, waiting until one is free; it reports false when stop closes
// first. The slot is not stealable.
func (p *slots) acquireWait(stop <-chan struct{}) bool {
	select {
	case p.tokens <- struct{}{}:
		return true
	case <-stop:
		return false
	}
}

// release frees a slot and wakes a reserve that waits for one.
func (p *slots) release() {
	<-p.tokens
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// reserve takes a slot for the pull loop to wait for a job in, waiting until one is free, and
// makes it stealable in the same step. It reports false when stop closes first.
func (p *slots) reserve(stop <-chan struct{}) bool {
	for {
		p.mu.Lock()
		ok := p.tryAcquire()
		if ok {
			p.state.Store(pullWaiting)
		}
		p.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-p.freed:
		case <-stop:
			return false
		}
	}
}

// beginWait registers cancel as the way to end the loop's wait in its reserved slot. stolen
// reports that a request took the slot already: the loop must not wait, and no longer holds it.
func (p *slots) beginWait(cancel context.CancelFunc) (stolen bool) {
	p.cancelWait.Store(&cancel)
	if p.state.Load() == pullStolen {
		p.state.Store(pullIdle)
		return true
	}
	return false
}

// endWait ends the wait: the slot is no longer stealable. stolen reports that a request took it
// meanwhile (the loop no longer holds it); otherwise the loop keeps it.
func (p *slots) endWait() (stolen bool) {
	if p.state.CompareAndSwap(pullWaiting, pullIdle) {
		return false
	}
	p.state.Store(pullIdle)
	return true
}

// waiting reports whether the pull loop waits in a stealable slot (tests).
func (p *slots) waiting() bool { return p.state.Load() == pullWaiting }
