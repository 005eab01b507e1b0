package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// tracker counts the goroutines a Service starts, so that Shutdown can wait for them and none
// starts after it stopped waiting. The zero value is ready to use.
type tracker struct {
	mu     sync.Mutex    // guards the fields below
	active int           // goroutines started and not yet finished
	closed bool          // no more goroutines may start
	idle   chan struct{} // closed when active drops to 0; nil when nobody waits
}

// goTrack runs f in a tracked goroutine. It reports false (and does not run f) once waitIdle has
// returned nil.
func (t *tracker) goTrack(f func()) bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	t.active++
	t.mu.Unlock()
	go func() {
		defer t.done()
		f()
	}()
	return true
}

func (t *tracker) done() {
	t.mu.Lock()
	t.active--
	if t.active == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
	t.mu.Unlock()
}

// waitIdle waits until no tracked goroutine runs and then refuses new ones, or until ctx is done.
func (t *tracker) waitIdle(ctx context.Context) error {
	for {
		t.mu.Lock()
		if t.active == 0 {
			t.closed = true
			t.mu.Unlock()
			return nil
		}
		if t.idle == nil {
			t.idle = make(chan struct{})
		}
		idle := t.idle
		t.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// handlerQuiet is how long the handler must have been idle before Shutdown takes the drained
// subscription's queue to be empty.
const handlerQuiet = 50 * time.Millisecond

// drainState is what the micro handler and Shutdown agree on.
//
// handling counts handler calls in progress and lastHandled is when the last one ended (unix ns):
// Shutdown waits for the handler to go quiet, because micro drains the subscription
// asynchronously and its last messages must be handed back while the connection can still
// subscribe (a connection in Drain cannot).
type drainState struct {
	handling    atomic.Int64
	lastHandled atomic.Int64
	microSubs   int // subscriptions micro made on nc (the endpoint and the $SRV verbs)

	// mu orders "am I draining?" checks in the handler against Shutdown: a forward published
	// under the read lock reaches the server before the subscription's UNSUB does.
	mu       sync.RWMutex
	draining bool
}

// enter and exit bracket one handler call.
func (d *drainState) enter() { d.handling.Add(1) }

func (d *drainState) exit() {
	d.lastHandled.Store(time.Now().UnixNano())
	d.handling.Add(-1)
}

// begin marks the service draining.
func (d *drainState) begin() {
	d.mu.Lock()
	d.draining = true
	d.mu.Unlock()
}

// isDraining reports whether begin was called.
func (d *drainState) isDraining() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.draining
}

// waitHandlerQuiet waits until no handler call runs and none ended within handlerQuiet, or ctx
// is done.
func (d *drainState) waitHandlerQuiet(ctx context.Context) {
	for {
		idleFor := time.Since(time.Unix(0, d.lastHandled.Load()))
		if d.handling.Load() == 0 && idleFor >= handlerQuiet {
			return
		}
		wait := handlerQuiet - idleFor
		if wait <= 0 {
			wait = time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
