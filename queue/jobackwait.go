package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// consumerAckWait is the AckWait of the jobs consumer as the server has it. Keep-alives follow it,
// not JobsConfig.AckWait: the consumer may exist with another (an existing consumer is never
// reconfigured), and InProgress sent at a longer wait than the consumer's lets a running job be
// delivered again. It is read from the consumer's info at setup and again at most every
// ackWaitRefresh, so `nats consumer edit` reaches running workers.
type consumerAckWait struct {
	consumer jetstream.Consumer
	wait     atomic.Int64 // time.Duration

	mu      sync.Mutex // held while the info is asked for; TryLock: nobody waits for it
	checked time.Time  // when the info was last asked for
}

// ackWaitRefresh is how often the consumer's AckWait is read again; ackWaitAsk bounds one read.
const (
	ackWaitRefresh = 30 * time.Second
	ackWaitAsk     = 2 * time.Second
)

func newConsumerAckWait(c jetstream.Consumer, fallback time.Duration) *consumerAckWait {
	a := &consumerAckWait{consumer: c, checked: time.Now()}
	a.set(c.CachedInfo().Config.AckWait, fallback)
	return a
}

func (a *consumerAckWait) set(d, fallback time.Duration) {
	if d <= 0 {
		d = fallback
	}
	a.wait.Store(int64(d))
}

// get returns the consumer's AckWait as last read.
func (a *consumerAckWait) get() time.Duration { return time.Duration(a.wait.Load()) }

// refresh reads the consumer's AckWait again when the last read is older than ackWaitRefresh. It
// returns at once when another caller is reading it; a failed read keeps the last value.
func (a *consumerAckWait) refresh(ctx context.Context) {
	if !a.mu.TryLock() {
		return
	}
	defer a.mu.Unlock()
	if time.Since(a.checked) < ackWaitRefresh {
		return
	}
	a.checked = time.Now()
	ctx, cancel := context.WithTimeout(ctx, ackWaitAsk)
	defer cancel()
	if info, err := a.consumer.Info(ctx); err == nil {
		a.set(info.Config.AckWait, a.get())
	}
}

// keepAliveEvery is the InProgress interval for an AckWait of d: a third of it, so one lost
// InProgress does not let the job go.
func keepAliveEvery(d time.Duration) time.Duration { return max(d/3, 10*time.Millisecond) }
