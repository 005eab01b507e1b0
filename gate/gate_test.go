package gate

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// All tests below run in a synctest bubble: time is virtual, starts at the bubble's epoch, and only
// moves when every goroutine in the bubble is blocked, so the times asserted are exact.

// startTogether makes n goroutines call Wait at the current instant and returns their start times,
// as offsets from t0, in order.
func startTogether(t *testing.T, g *Gate, t0 time.Time, n int) []time.Duration {
	t.Helper()
	var (
		mu     sync.Mutex
		starts []time.Duration
		wg     sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			if _, err := g.Wait(t.Context()); err != nil {
				t.Errorf("Wait: %v", err)
				return
			}
			mu.Lock()
			starts = append(starts, time.Since(t0))
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(starts)
	return starts
}

// take waits for one permit and returns it with its start offset from t0.
func take(t *testing.T, g *Gate, t0 time.Time) (Permit, time.Duration) {
	t.Helper()
	p, err := g.Wait(t.Context())
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return p, time.Since(t0)
}

func reject(t *testing.T, g *Gate, n int) {
	t.Helper()
	for range n {
		p, err := g.Wait(t.Context())
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		p.Forbidden(0)
	}
}

func succeed(t *testing.T, g *Gate, n int) {
	t.Helper()
	for range n {
		p, err := g.Wait(t.Context())
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		p.Succeeded()
	}
}

// every returns n offsets 0, d, 2d, ... shifted by from.
func every(from, d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = from + time.Duration(i)*d
	}
	return out
}

func TestIdleGateStartsEveryoneAtOnce(t *testing.T) {
	for _, cfg := range []Config{Reference(), {Mode: Fixed}, {Mode: Off, Floor: time.Second}} {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(cfg)
				t0 := time.Now()
				got := startTogether(t, g, t0, 50)
				if want := every(0, 0, 50); !slices.Equal(got, want) {
					t.Errorf("starts = %v, want all at 0", got)
				}
				s := g.Snapshot()
				if s.Starts != 50 || s.Waited != 0 {
					t.Errorf("Starts, Waited = %d, %v; want 50, 0", s.Starts, s.Waited)
				}
			})
		})
	}
}

func TestOneRejectionSpacesLaterStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Mode: ReferenceMode})
		t0 := time.Now()
		p, _ := take(t, g, t0)
		p.Forbidden(0)
		got := startTogether(t, g, t0, 5)
		if want := every(time.Second, time.Second, 5); !slices.Equal(got, want) {
			t.Errorf("starts = %v, want %v", got, want)
		}
	})
}

func TestSequentialRejectionsWiden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Mode: ReferenceMode})
		t0 := time.Now()
		wantSpacing := []time.Duration{1, 2, 4, 8, 8, 8}
		// Each rejection pushes the next start to now + the new spacing.
		wantStart := []time.Duration{0, 1, 3, 7, 15, 23}
		for i := range wantSpacing {
			p, at := take(t, g, t0)
			if at != wantStart[i]*time.Second {
				t.Errorf("attempt %d started at %v, want %v", i+1, at, wantStart[i]*time.Second)
			}
			if got := p.Start().Sub(t0); got != at {
				t.Errorf("attempt %d: Permit.Start() at %v, want %v", i+1, got, at)
			}
			p.Forbidden(0)
			if got := g.Snapshot().Spacing; got != wantSpacing[i]*time.Second {
				t.Errorf("after rejection %d: spacing %v, want %v", i+1, got, wantSpacing[i]*time.Second)
			}
		}
	})
}

func TestBurstOfRejectionsWidensOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Mode: ReferenceMode})
		t0 := time.Now()
		var wg sync.WaitGroup
		for range 30 {
			wg.Go(func() {
				p, err := g.Wait(t.Context())
				if err != nil {
					t.Errorf("Wait: %v", err)
					return
				}
				time.Sleep(500 * time.Millisecond) // the handshake's latency
				p.Forbidden(0)
			})
		}
		wg.Wait()
		s := g.Snapshot()
		if s.Spacing != time.Second || s.Rejections != 30 {
			t.Fatalf("after a burst of 30 rejections: spacing %v, rejections %d; want 1s, 30", s.Spacing, s.Rejections)
		}
		// The burst pushed the next start to 0.5s + 1s; an attempt started after the widening
		// is a new signal and widens again.
		p, at := take(t, g, t0)
		if at != 1500*time.Millisecond {
			t.Errorf("next start at %v, want 1.5s", at)
		}
		p.Forbidden(0)
		if got := g.Snapshot().Spacing; got != 2*time.Second {
			t.Errorf("a rejection after the burst: spacing %v, want 2s", got)
		}
	})
}

func TestRelax(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		rejections int
		successes  int
		want       time.Duration
		wantStreak int
	}{
		{"19 successes do not halve", Config{Mode: ReferenceMode}, 1, 19, time.Second, 19},
		{"20 successes halve, below Widen snaps to 0", Config{Mode: ReferenceMode}, 1, 20, 0, 0},
		{"20 successes halve 8s", Config{Mode: ReferenceMode}, 4, 20, 4 * time.Second, 0},
		{"39 successes halve once", Config{Mode: ReferenceMode}, 4, 39, 4 * time.Second, 19},
		{"it returns to 0", Config{Mode: ReferenceMode}, 4, 80, 0, 0},
		{"RelaxAfter is configurable", Config{Mode: ReferenceMode, RelaxAfter: 3}, 2, 3, time.Second, 0},
		{"floor is never relaxed away", Config{Mode: ReferenceMode, Floor: 2 * time.Second}, 1, 100, 2 * time.Second, 0},
		{"snap goes to the floor, not 0", Config{Mode: ReferenceMode, Floor: 300 * time.Millisecond}, 1, 20, 300 * time.Millisecond, 0},
		{"floor above Max", Config{Mode: ReferenceMode, Floor: 10 * time.Second, Max: 8 * time.Second}, 3, 100, 10 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(tt.cfg)
				reject(t, g, tt.rejections)
				succeed(t, g, tt.successes)
				s := g.Snapshot()
				if s.Spacing != tt.want || s.Streak != tt.wantStreak {
					t.Errorf("spacing, streak = %v, %d; want %v, %d", s.Spacing, s.Streak, tt.want, tt.wantStreak)
				}
			})
		})
	}
}

func TestRejectionResetsStreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Mode: ReferenceMode})
		t0 := time.Now()
		old, _ := take(t, g, t0) // started before the widening below: its rejection will not widen
		p, _ := take(t, g, t0)
		p.Forbidden(0)
		succeed(t, g, 10)
		old.Forbidden(0)
		if s := g.Snapshot(); s.Spacing != time.Second || s.Streak != 0 {
			t.Fatalf("after a stale rejection mid-streak: spacing, streak = %v, %d; want 1s, 0", s.Spacing, s.Streak)
		}
		succeed(t, g, 19)
		if got := g.Snapshot().Spacing; got != time.Second {
			t.Fatalf("10 + 19 successes around a rejection halved the spacing to %v; want 1s", got)
		}
		succeed(t, g, 1)
		if got := g.Snapshot().Spacing; got != 0 {
			t.Errorf("20 successes after the rejection: spacing %v, want 0", got)
		}
	})
}

func TestFloor(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		rejections  int
		wantSpacing time.Duration
	}{
		{"floor paces an idle gate", Config{Mode: ReferenceMode, Floor: 2 * time.Second}, 0, 2 * time.Second},
		{"floor above Widen doubles", Config{Mode: ReferenceMode, Floor: 2 * time.Second}, 1, 4 * time.Second},
		{"floor below Widen widens to Widen", Config{Mode: ReferenceMode, Floor: 300 * time.Millisecond}, 1, time.Second},
		{"capped at Max", Config{Mode: ReferenceMode, Floor: 2 * time.Second}, 5, 8 * time.Second},
		{"floor above Max wins", Config{Mode: ReferenceMode, Floor: 10 * time.Second, Max: 8 * time.Second}, 3, 10 * time.Second},
		{"custom Widen and Max", Config{Mode: ReferenceMode, Widen: 250 * time.Millisecond, Max: time.Second}, 4, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(tt.cfg)
				reject(t, g, tt.rejections)
				if got := g.Snapshot().Spacing; got != tt.wantSpacing {
					t.Fatalf("spacing %v, want %v", got, tt.wantSpacing)
				}
				// Whatever pushes are pending, consecutive starts are exactly the spacing apart.
				time.Sleep(time.Minute)
				t0 := time.Now()
				got := startTogether(t, g, t0, 4)
				if want := every(0, tt.wantSpacing, 4); !slices.Equal(got, want) {
					t.Errorf("starts = %v, want %v", got, want)
				}
			})
		})
	}
}

func TestRetryAfterPushesNextStart(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		retryAfter time.Duration
		want       time.Duration // start of the next attempt
	}{
		{"longer than spacing wins", Config{Mode: ReferenceMode}, 5 * time.Second, 5 * time.Second},
		{"shorter than spacing", Config{Mode: ReferenceMode}, 500 * time.Millisecond, time.Second},
		{"none", Config{Mode: ReferenceMode}, 0, time.Second},
		{"longer than Max", Config{Mode: ReferenceMode}, time.Minute, time.Minute},
		// Adaptive: a rejection with nothing accepted in the last second sets spacing to 1s.
		{"adaptive: longer than spacing wins", Config{}, 5 * time.Second, 5 * time.Second},
		{"adaptive: shorter than spacing", Config{}, 500 * time.Millisecond, time.Second},
		{"adaptive: none", Config{}, 0, time.Second},
		{"adaptive: longer than Max", Config{}, time.Minute, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(tt.cfg)
				t0 := time.Now()
				p, _ := take(t, g, t0)
				p.Forbidden(tt.retryAfter)
				if _, at := take(t, g, t0); at != tt.want {
					t.Errorf("next start at %v, want %v", at, tt.want)
				}
				if got := g.Snapshot().Spacing; got != time.Second {
					t.Errorf("spacing %v, want 1s (Retry-After moves the start, not the spacing)", got)
				}
			})
		})
	}
}

func TestCancelledWait(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func(context.Context) (context.Context, context.CancelFunc)
		wantErr error
	}{
		{"deadline", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 500*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(500*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Config{Mode: Fixed, Floor: time.Second})
				t0 := time.Now()
				take(t, g, t0) // holds the slot at 0; the next is at 1s
				ctx, cancel := tt.ctx(t.Context())
				defer cancel()
				_, err := g.Wait(ctx)
				if err != tt.wantErr { // unwrapped: identity, not errors.Is
					t.Errorf("Wait = %v, want %v", err, tt.wantErr)
				}
				if at := time.Since(t0); at != 500*time.Millisecond {
					t.Errorf("cancelled Wait returned at %v, want 500ms", at)
				}
				// The slot at 1s was given back: the next caller gets it, not 2s.
				if _, at := take(t, g, t0); at != time.Second {
					t.Errorf("start after a cancelled wait at %v, want 1s", at)
				}
				s := g.Snapshot()
				if s.Starts != 2 || s.Waited != time.Second {
					t.Errorf("Starts, Waited = %d, %v; want 2, 1s (0.5s cancelled + 0.5s)", s.Starts, s.Waited)
				}
			})
		})
	}
}

func TestWaitOnDoneContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Mode: Fixed, Floor: time.Second})
		t0 := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := g.Wait(ctx); err != context.Canceled {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
		// Nothing was reserved: the first real start is at once.
		if _, at := take(t, g, t0); at != 0 {
			t.Errorf("first start at %v, want 0", at)
		}
		if s := g.Snapshot(); s.Starts != 1 {
			t.Errorf("Starts = %d, want 1", s.Starts)
		}
	})
}

func TestCancelledWaitBehindAnotherKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Mode: Fixed, Floor: time.Second})
		t0 := time.Now()
		take(t, g, t0)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { _, err := g.Wait(ctx); errc <- err }() // slot 1s
		synctest.Wait()
		later := make(chan time.Duration, 1)
		go func() { // slot 2s
			if _, err := g.Wait(t.Context()); err != nil {
				t.Errorf("Wait: %v", err)
			}
			later <- time.Since(t0)
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
		if at := <-later; at != 2*time.Second {
			t.Errorf("the start reserved behind the cancelled one began at %v, want 2s", at)
		}
	})
}

func TestFixedModeIgnoresOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Mode: Fixed, Floor: time.Second})
		t0 := time.Now()
		var starts []time.Duration
		for i := range 45 {
			p, at := take(t, g, t0)
			starts = append(starts, at)
			if i%2 == 0 {
				p.Forbidden(5 * time.Second)
			} else {
				p.Succeeded()
			}
		}
		if want := every(0, time.Second, 45); !slices.Equal(starts, want) {
			t.Errorf("starts = %v, want one per second", starts)
		}
		s := g.Snapshot()
		if s.Mode != Fixed || s.Spacing != time.Second || s.Streak != 0 || s.Rejections != 23 || s.Successes != 22 {
			t.Errorf("snapshot = %+v, want fixed, 1s, streak 0, 23 rejections, 22 successes", s)
		}
	})
}

func TestOffModeNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Mode: Off, Floor: time.Second})
		t0 := time.Now()
		for range 5 {
			p, at := take(t, g, t0)
			if at != 0 {
				t.Fatalf("off gate made a start wait until %v", at)
			}
			p.Forbidden(time.Minute)
		}
		if got := startTogether(t, g, t0, 10); !slices.Equal(got, every(0, 0, 10)) {
			t.Errorf("starts = %v, want all at 0", got)
		}
		s := g.Snapshot()
		if s.Mode != Off || s.Spacing != 0 || s.Rejections != 5 || s.Starts != 15 || s.Waited != 0 {
			t.Errorf("snapshot = %+v, want off, spacing 0, 5 rejections, 15 starts, waited 0", s)
		}
	})
}

func TestSnapshotCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Mode: Fixed, Floor: time.Second})
		t0 := time.Now()
		if got := startTogether(t, g, t0, 3); !slices.Equal(got, every(0, time.Second, 3)) {
			t.Fatalf("starts = %v", got)
		}
		p, _ := take(t, g, t0) // at 3s
		p.Succeeded()
		p.Forbidden(0)
		p.Failed()
		Permit{}.Succeeded() // a zero Permit is ignored
		// Waits: 0 + 1s + 2s together, then 1s (from 2s, when they returned, to 3s).
		want := Snapshot{Mode: Fixed, Spacing: time.Second, Starts: 4, Waited: 4 * time.Second,
			Rejections: 1, Successes: 1, Failures: 1}
		if got := g.Snapshot(); got != want {
			t.Errorf("Snapshot() = %+v, want %+v", got, want)
		}
	})
}

func TestReferencePresetWidensToMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Reference())
		t0 := time.Now()
		reject(t, g, 5)
		s := g.Snapshot()
		if s.Mode != ReferenceMode || s.Spacing != 8*time.Second {
			t.Errorf("reference Gate after 5 rejections: mode %q spacing %v, want reference 8s", s.Mode, s.Spacing)
		}
		if at := time.Since(t0); at != 15*time.Second {
			t.Errorf("5 sequential rejections took %v, want 15s", at)
		}
	})
}

func TestConfigDefaults(t *testing.T) {
	want := Config{Mode: Adaptive, Widen: time.Second, Max: 8 * time.Second, RelaxAfter: 20,
		InitialWindow: 2, MaxWindow: 1024, Backoff: 1.25, Relax: 15.0 / 16, RelaxRun: 8,
		RateWindow: time.Second, Lease: time.Minute, ReportInterval: 100 * time.Millisecond}
	if got := (Config{}).withDefaults(); got != want {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
	ref := Config{Mode: ReferenceMode, Widen: time.Second, Max: 8 * time.Second, RelaxAfter: 20}
	if got := Reference(); got != ref {
		t.Errorf("Reference() = %+v, want %+v", got, ref)
	}
	if got := (Config{Floor: -1, Widen: -1, Max: -1, RelaxAfter: -1, InitialWindow: -1, MaxWindow: -1,
		Backoff: math.NaN(), Relax: 1, RelaxRun: -1, RateWindow: -1, Lease: -1, ReportInterval: -1}).withDefaults(); got != want {
		t.Errorf("negative values = %+v, want the defaults %+v", got, want)
	}
	if got, want := ReferencePolicy(), (Policy{}).withDefaults(); got != want {
		t.Errorf("ReferencePolicy() = %+v, want %+v", got, want)
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{"", Adaptive, false},
		{"adaptive", Adaptive, false},
		{"reference", ReferenceMode, false},
		{"fixed", Fixed, false},
		{"off", Off, false},
		{"Off", "", true},
		{"slow", "", true},
	}
	for _, tt := range tests {
		var m Mode
		err := m.UnmarshalText([]byte(tt.in))
		if m != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("UnmarshalText(%q) = %q, %v; want %q, error %v", tt.in, m, err, tt.want, tt.wantErr)
		}
	}
}

func TestNewPanicsOnUnknownMode(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New with an unknown mode did not panic")
		}
	}()
	New(Config{Mode: "turbo"})
}

func TestSpacingArithmetic(t *testing.T) {
	c := Config{Floor: 0, Widen: time.Second, Max: 8 * time.Second}.withDefaults()
	huge := Config{Max: math.MaxInt64}.withDefaults()
	tests := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"widen from 0", c.widened(0), time.Second},
		{"widen below Widen", c.widened(300 * time.Millisecond), time.Second},
		{"double", c.widened(3 * time.Second), 6 * time.Second},
		{"cap", c.widened(5 * time.Second), 8 * time.Second},
		{"no overflow", huge.widened(math.MaxInt64/2 + 1), math.MaxInt64},
		{"relax", c.relaxed(8 * time.Second), 4 * time.Second},
		{"relax to exactly Widen", c.relaxed(2 * time.Second), time.Second},
		{"relax below Widen snaps", c.relaxed(1999 * time.Millisecond), 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
