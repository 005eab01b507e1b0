package gate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkWaitParallel measures the cost of the gate to an idle, healthy process: spacing 0,
// every goroutine starting at once. It must not allocate and must never wait.
func BenchmarkWaitParallel(b *testing.B) {
	g := New(Reference())
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Wait(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if w := g.Snapshot().Waited; w != 0 {
		b.Fatalf("callers waited %v at spacing 0, want 0", w)
	}
}

// BenchmarkWaitAndReportParallel adds the outcome report that every start makes.
func BenchmarkWaitAndReportParallel(b *testing.B) {
	g := New(Reference())
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := g.Wait(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			p.Succeeded()
		}
	})
}

// BenchmarkAdaptiveWaitAndReportParallel is the same for the default mode: every start holds a
// window slot until its report, so Wait and report go together.
func BenchmarkAdaptiveWaitAndReportParallel(b *testing.B) {
	g := New(Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := g.Wait(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			p.Succeeded()
		}
	})
	if s := g.Snapshot(); s.Spacing != 0 || s.Rejections != 0 {
		b.Fatalf("healthy run ended with spacing %v, %d rejections; want 0, 0", s.Spacing, s.Rejections)
	}
}

// sharing gives g a live peer, kept live by a goroutine that plays its transport, until stop.
func sharing(g *Gate) (stop func()) {
	p := newFakePeer(7)
	now := time.Now()
	for i := 4; i >= 0; i-- { // trusted: heard over 4 intervals, the last one now
		g.observeAt(p.next(func(s *Signal) { s.Demand = 1 }), now.Add(-time.Duration(i)*interval))
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				g.Observe(p.next(nil))
				g.NextSignal()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// BenchmarkAdaptiveSharedWaitAndReportParallel is BenchmarkAdaptiveWaitAndReportParallel with a
// live peer: sharing adds no allocation to a start.
func BenchmarkAdaptiveSharedWaitAndReportParallel(b *testing.B) {
	g := New(Config{})
	defer sharing(g)()
	if g.Snapshot().Peers != 1 {
		b.Fatal("no live peer")
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := g.Wait(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			p.Succeeded()
		}
	})
	if s := g.Snapshot(); s.Peers != 1 || s.Spacing != 0 {
		b.Fatalf("peers %d, spacing %v; want 1, 0", s.Peers, s.Spacing)
	}
}

// Benchmark10kGoroutines lets 10,000 goroutines take one slot each at spacing 0: all go through
// and none waits. One op is the whole burst.
func Benchmark10kGoroutines(b *testing.B) {
	const n = 10_000
	ctx := context.Background()
	for b.Loop() {
		g := New(Reference())
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				p, err := g.Wait(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				p.Succeeded()
			})
		}
		wg.Wait()
		if s := g.Snapshot(); s.Starts != n || s.Waited != 0 {
			b.Fatalf("starts %d, waited %v; want %d, 0", s.Starts, s.Waited, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/start")
}

// TestWaitDoesNotAllocate keeps the benchmark's promise in the ordinary test run.
func TestWaitDoesNotAllocate(t *testing.T) {
	g := New(Reference())
	rejected := New(Reference()) // takes the rejections, so that g stays at spacing 0
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		p, err := g.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Succeeded()
		p.Failed()
		Permit{g: rejected, start: p.start}.Forbidden(0)
	})
	if allocs != 0 {
		t.Errorf("Wait and the reports allocate %v times per start, want 0", allocs)
	}
}

// TestSharedWaitDoesNotAllocate: with a live peer, a start, its report, making a signal and
// applying one do not allocate.
func TestSharedWaitDoesNotAllocate(t *testing.T) {
	g := New(Config{})
	defer sharing(g)()
	ctx := context.Background()
	p := newFakePeer(8)
	allocs := testing.AllocsPerRun(1000, func() {
		pm, err := g.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pm.Succeeded()
		if _, ok := g.NextSignal(); !ok {
			_ = ok // over the interval's budget: fine
		}
		g.Observe(p.next(nil))
		g.Estimate()
	})
	if allocs != 0 {
		t.Errorf("a shared start allocates %v times, want 0", allocs)
	}
}

// fleetOf makes n trusted peers of g (ids from 100, no demand), heard over 4 intervals up to now.
func fleetOf(g *Gate, n int, now time.Time) []*fakePeer {
	peers := make([]*fakePeer, n)
	for i := range peers {
		peers[i] = newFakePeer(uint64(i + 100))
	}
	for k := 4; k >= 0; k-- {
		for _, p := range peers {
			g.observeAt(p.next(nil), now.Add(-time.Duration(k)*interval))
		}
	}
	return peers
}

// BenchmarkObserveFleet applies one signal of a fleet of n trusted peers that each signal once
// an interval (in the gate's clock, which the benchmark moves) and report an acceptance each:
// the work per peer's signal, which scans the peer table (the picture, the median). 31 peers fit
// every table size the gate has had (32 before issue 43), so the sizes compare side by side.
func BenchmarkObserveFleet(b *testing.B) {
	for _, n := range []int{1, 31, 127} {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			g := New(Config{})
			now := time.Now()
			peers := fleetOf(g, n, now)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now = now.Add(interval / time.Duration(n))
				g.observeAt(peers[i%n].next(func(s *Signal) { s.Accepted++ }), now)
				i++
			}
			a := g.ctl.(*adaptive)
			a.mu.Lock()
			defer a.mu.Unlock()
			if live := a.livePeers(now); live != n || a.f.flooded+a.f.doubted+a.f.invalid != 0 {
				b.Fatalf("peers %d, signals flooded %d, doubted %d, invalid %d; want %d, 0, 0, 0", live, a.f.flooded, a.f.doubted, a.f.invalid, n)
			}
		})
	}
}

// BenchmarkFleetWaitAndReport starts and reports upgrades at a gate with n live peers (kept live
// by a goroutine that plays their signals, each an interval apart): the start's work that scans
// the peer table (the window's share, the ranks, the turns).
func BenchmarkFleetWaitAndReport(b *testing.B) {
	for _, n := range []int{1, 31, 127} {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			g := New(Config{})
			peers := fleetOf(g, n, time.Now())
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				t := time.NewTicker(interval / time.Duration(4*n))
				defer t.Stop()
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					case <-t.C:
						g.Observe(peers[i%n].next(func(s *Signal) { s.Accepted++ }))
					}
				}
			})
			defer func() { close(done); wg.Wait() }()
			ctx := context.Background()
			step := func() {
				p, err := g.Wait(ctx)
				if err != nil {
					b.Fatal(err)
				}
				p.Succeeded()
			}
			for range 1000 { // the window grows past the fleet's size
				step()
			}
			waited := g.Snapshot().Waited
			b.ReportAllocs()
			for b.Loop() {
				step()
			}
			if s := g.Snapshot(); s.Waited != waited || s.Spacing != 0 || s.Peers != n {
				b.Fatalf("waited %v more, spacing %v, peers %d; want 0, 0, %d", s.Waited-waited, s.Spacing, s.Peers, n)
			}
		})
	}
}
