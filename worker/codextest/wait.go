package codextest

import (
	"context"
	"sync"
	"time"
)

// Waiting for a count to reach a value (WaitOpenSockets, WaitAborts) without polling: the
// count's owner notifies a broadcast on every change, and waitUntil re-checks on each.

// An abortLog counts client aborts, for Stats and WaitAborts.
type abortLog struct {
	mu   sync.Mutex
	n    int64
	last time.Time
	seen broadcast // on every abort
}

func (l *abortLog) record(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	l.last = now
	l.seen.notify()
}

func (l *abortLog) read() (n int64, last time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.last
}

func (l *abortLog) reset() {
	l.mu.Lock()
	l.n, l.last = 0, time.Time{}
	l.mu.Unlock()
}

func (l *abortLog) wait(ctx context.Context, n int64) error {
	return waitUntil(ctx, &l.mu, &l.seen, func() bool { return l.n >= n })
}

// A broadcast wakes every waiter at once: its channel is closed, and replaced, on notify. Its
// owner's lock guards it; the zero broadcast is ready.
type broadcast struct{ ch chan struct{} }

func (b *broadcast) notify() {
	if b.ch != nil {
		close(b.ch)
	}
	b.ch = make(chan struct{})
}

func (b *broadcast) wait() <-chan struct{} {
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// waitUntil waits until done, checked under mu, holds, waking on every notify of b; or until
// ctx ends, returning ctx.Err().
func waitUntil(ctx context.Context, mu *sync.Mutex, b *broadcast, done func() bool) error {
	for {
		mu.Lock()
		if done() {
			mu.Unlock()
			return nil
		}
		ch := b.wait()
		mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
