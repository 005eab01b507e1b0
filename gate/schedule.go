package gate

import (
	"context"
	"sync"
	"time"
)

// schedule hands out start slots spacing apart, for ReferenceMode and Fixed. A start reserves the
// next slot under the lock, start = max(now, next) and next = start + spacing, and then waits
// until start outside the lock, so nothing ever sleeps while holding it.
type schedule struct {
	mu      sync.Mutex
	spacing time.Duration // gap between consecutive starts
	next    time.Time     // earliest start of the next reservation
	seq     uint64        // bumped whenever next moves, so a cancelled wait knows it was the last
}

// reservation is one reserved slot. seq is 0 when the reservation did not move next.
type reservation struct {
	start time.Time
	seq   uint64
}

// reserve takes the next slot at time now.
func (s *schedule) reserve(now time.Time) reservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := now
	if s.next.After(now) {
		start = s.next
	}
	if s.spacing <= 0 {
		// next = start + 0 = max(now, next): leaving it alone is equivalent, and callers that read
		// the clock a little earlier are not made to wait a few nanoseconds on a timer.
		return reservation{start: start}
	}
	s.next = start.Add(s.spacing)
	s.seq++
	return reservation{start: start, seq: s.seq}
}

// cancel gives r's slot back if nothing has moved next since r took it.
func (s *schedule) cancel(r reservation) {
	if r.seq == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq == r.seq {
		s.next = r.start
		s.seq++
	}
}

// wait reserves a slot and sleeps until it begins, or gives it back if ctx ends first.
func (s *schedule) wait(ctx context.Context, now time.Time, _ request) (grant, error) {
	r := s.reserve(now)
	delay := r.start.Sub(now)
	if delay <= 0 {
		return grant{start: r.start}, nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return grant{start: r.start, waited: time.Since(now)}, nil
	case <-ctx.Done():
		s.cancel(r)
		return grant{waited: time.Since(now)}, ctx.Err()
	}
}

// fixed is the Fixed controller: starts Floor apart, forever.
type fixed struct{ schedule }

func newFixed(c Config) *fixed { return &fixed{schedule{spacing: c.Floor}} }

func (f *fixed) report(Permit, outcome, time.Time, time.Duration) {}

func (f *fixed) snapshot(s *Snapshot) { s.Spacing = f.spacing }

// off is the Off controller: starts never wait.
type off struct{}

func (off) wait(_ context.Context, now time.Time, _ request) (grant, error) {
	return grant{start: now}, nil
}

func (off) report(Permit, outcome, time.Time, time.Duration) {}

func (off) snapshot(*Snapshot) {}
