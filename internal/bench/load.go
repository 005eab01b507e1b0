package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codexpool/codexpool/internal/progress"
)

// load is what drive measured.
type load struct {
	mu         sync.Mutex
	ok, failed int
	errors     map[string]int
	latencies  []time.Duration // of the successful requests, sorted
	wall       time.Duration
}

func newLoad(total int) *load {
	return &load{errors: map[string]int{}, latencies: make([]time.Duration, 0, total)}
}

// done ends the measurement that began at start.
func (ld *load) done(start time.Time, prog *progress.Meter) {
	ld.wall = time.Since(start)
	prog.Finish()
	slices.Sort(ld.latencies)
}

// call runs fn for request i, times it and records the outcome.
func (ld *load) call(ctx context.Context, i int, fn func(ctx context.Context, i int) error, prog *progress.Meter) {
	t0 := time.Now()
	err := fn(ctx, i)
	ld.record(err, time.Since(t0))
	prog.Add(err != nil)
}

// record counts one request's outcome: its error, or its latency d.
func (ld *load) record(err error, d time.Duration) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if err != nil {
		ld.failed++
		ld.errors[errorKey(err)]++
	} else {
		ld.ok++
		ld.latencies = append(ld.latencies, d)
	}
}

// drive runs total calls of fn, conc at a time, and measures them.
func drive(ctx context.Context, total, conc int, prog *progress.Meter, fn func(ctx context.Context, i int) error) *load {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		ld   = newLoad(total)
	)
	start := time.Now()
	for range min(conc, total) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total || ctx.Err() != nil {
					return
				}
				ld.call(ctx, i, fn, prog)
			}
		}()
	}
	wg.Wait()
	ld.done(start, prog)
	return ld
}

// fill copies the measurements into a result row.
func (ld *load) fill(r *Result) {
	r.OK, r.Failed = ld.ok, ld.failed
	r.WallSeconds = ld.wall.Seconds()
	r.ReqPerSec = float64(ld.ok) / ld.wall.Seconds()
	r.P50ms, r.P95ms, r.P99ms = pct(ld.latencies, 50), pct(ld.latencies, 95), pct(ld.latencies, 99)
	if len(ld.errors) > 0 {
		r.Errors = ld.errors
	}
}

// newProgress is a scenario's progress display, labelled desc.
func newProgress(w io.Writer, quiet bool, total int, desc string) *progress.Meter {
	return progress.New(w, quiet, progress.Config{
		Total: total,
		Unit:  "req",
		Label: func(progress.Status) string { return desc },
		Line: func(s progress.Status) string {
			return fmt.Sprintf("bench: %s %d/%d done (%.0fs)", desc, s.Done, s.Total, s.Elapsed.Seconds())
		},
	})
}

// driveOpen starts total calls of fn at a fixed arrival rate (open loop: arrivals do not wait
// for earlier calls), then waits for all of them.
func driveOpen(ctx context.Context, rate float64, total int, prog *progress.Meter, fn func(ctx context.Context, i int) error) *load {
	var (
		wg sync.WaitGroup
		ld = newLoad(total)
	)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ld.call(ctx, i, fn, prog)
		}()
	}
	wg.Wait()
	ld.done(start, prog)
	return ld
}
