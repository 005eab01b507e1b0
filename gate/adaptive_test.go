package gate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// handshake is the simulated time of one upgrade in these tests.
const handshake = time.Millisecond

// startAll makes n goroutines Connect-like: Wait, take handshake, report with report; it returns
// the start offsets from t0, sorted.
func startAll(t *testing.T, g *Gate, t0 time.Time, n int, report func(Permit)) []time.Duration {
	t.Helper()
	var (
		mu     sync.Mutex
		starts []time.Duration
		wg     sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			p, err := g.Wait(t.Context())
			if err != nil {
				t.Errorf("Wait: %v", err)
				return
			}
			mu.Lock()
			starts = append(starts, time.Since(t0))
			mu.Unlock()
			time.Sleep(handshake)
			report(p)
		})
	}
	wg.Wait()
	slices.Sort(starts)
	return starts
}

// perRound counts starts per handshake round.
func perRound(starts []time.Duration) []int {
	var out []int
	for _, s := range starts {
		r := int(s / handshake)
		for len(out) <= r {
			out = append(out, 0)
		}
		out[r]++
	}
	return out
}

func TestAdaptiveSlowStartGrowsByHalfEachRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		t0 := time.Now()
		got := perRound(startAll(t, g, t0, 100, Permit.Succeeded))
		// 2 at once; each success frees its slot and every second one adds one: 3, 4, 6, 9, 14,
		// 21, 31, then the rest.
		if want := []int{2, 3, 4, 6, 9, 14, 21, 31, 10}; !slices.Equal(got, want) {
			t.Errorf("starts per handshake round = %v, want %v", got, want)
		}
		// In the last rounds it grows only while it is at least half full, which depends on the
		// order in which the reports and waits of one instant come.
		if s := g.Snapshot(); s.Window < 40 || s.Window > 50 || s.InFlight != 0 || s.Spacing != 0 || s.Rejections != 0 {
			t.Errorf("snapshot %+v, want window 40-50, nothing in flight, spacing 0", s)
		}
	})
}

func TestAdaptiveWindowGrowsOnlyWhileItLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		succeed(t, g, 100) // one at a time: half of 2 is full, half of 3 is not
		if s := g.Snapshot(); s.Window != 3 || s.Starts != 100 || s.Waited != 0 {
			t.Errorf("window %d after 100 sequential successes (starts %d, waited %v), want 3, 100, 0", s.Window, s.Starts, s.Waited)
		}
	})
}

func TestAdaptiveMaxWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{InitialWindow: 2, MaxWindow: 5})
		got := perRound(startAll(t, g, time.Now(), 20, Permit.Succeeded))
		if want := []int{2, 3, 4, 5, 5, 1}; !slices.Equal(got, want) {
			t.Errorf("starts per round = %v, want %v", got, want)
		}
	})
}

func TestAdaptiveRejectionHalvesWindowOnceAndSetsMeasuredSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		t0 := time.Now()
		startAll(t, g, t0, 20, Permit.Succeeded) // 20 accepted in the last second
		time.Sleep(500 * time.Millisecond)
		before := g.Snapshot().Window
		// A whole window in flight together, all rejected: one signal.
		t1 := time.Now()
		got := startAll(t, g, t1, before, func(p Permit) { p.Forbidden(0) })
		if !slices.Equal(got, every(0, 0, before)) {
			t.Fatalf("starts %v, want all %d at once", got, before)
		}
		s := g.Snapshot()
		// 20 accepted upgrades in the last second: the origin takes 20/s, so 50ms.
		if s.Window != before/2 || s.Spacing != 50*time.Millisecond || s.InFlight != 0 {
			t.Errorf("window %d, spacing %v, in flight %d; want %d (halved once), 50ms, 0", s.Window, s.Spacing, s.InFlight, before/2)
		}
		// The next start waits for now + spacing; the ones after it are spacing apart.
		got = startAll(t, g, t1, 3, Permit.Succeeded)
		if want := every(handshake+50*time.Millisecond, 50*time.Millisecond, 3); !slices.Equal(got, want) {
			t.Errorf("starts after the rejection %v, want %v", got, want)
		}
	})
}

func TestAdaptiveNothingAcceptedMeansOnePerRateWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		reject(t, g, 1)
		if got := g.Snapshot().Spacing; got != time.Second {
			t.Errorf("spacing %v after a rejection with nothing accepted, want 1s (RateWindow)", got)
		}
	})
}

func TestAdaptiveBackoff(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		rejections int
		want       time.Duration
	}{
		{"first: measured", Config{}, 1, time.Second},
		{"then x1.25", Config{}, 2, 1250 * time.Millisecond},
		{"x1.25 again", Config{}, 3, 1562500 * time.Microsecond},
		{"capped at Max", Config{}, 20, 8 * time.Second},
		{"custom Backoff", Config{Backoff: 2}, 3, 4 * time.Second},
		{"custom RateWindow", Config{RateWindow: 500 * time.Millisecond}, 1, 500 * time.Millisecond},
		{"a floor paces from the start, backoff from there", Config{Floor: 3 * time.Second}, 1, 3750 * time.Millisecond},
		{"floor above Max wins", Config{Floor: 10 * time.Second}, 20, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(tt.cfg)
				reject(t, g, tt.rejections)
				if got := g.Snapshot().Spacing; got != tt.want {
					t.Errorf("spacing %v, want %v", got, tt.want)
				}
			})
		})
	}
}

func TestAdaptiveBackoffNeverBelowMeasured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		reject(t, g, 1) // 1s
		a := g.ctl.(*adaptive)
		a.mu.Lock()
		a.spacing = 10 * time.Millisecond // as if relaxed far below the origin's rate
		a.mu.Unlock()
		succeed(t, g, 4) // 4 accepted in the last second
		reject(t, g, 1)
		if got := g.Snapshot().Spacing; got != 250*time.Millisecond {
			t.Errorf("spacing %v, want 250ms (1s / 4 accepted), not 12.5ms", got)
		}
	})
}

// relaxSteps returns the spacing after each run of RelaxRun successes while callers are queued.
func relaxSteps(cfg Config, from time.Duration, runs int, queued bool) []time.Duration {
	a := newAdaptive(cfg.withDefaults())
	a.spacing = from
	if queued {
		a.queue = []*waiter{{}}
	}
	var out []time.Duration
	for range runs {
		for range a.cfg.RelaxRun {
			a.succeeded(time.Now())
		}
		out = append(out, a.spacing)
	}
	return out
}

func TestAdaptiveRelax(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		cfg    Config
		from   time.Duration
		runs   int
		queued bool
		want   []time.Duration
	}{
		// Cuts of 1/16, 2/16, 3/16, ... up to 1/2 per step: gentle near a rejected rate, fast after.
		{"accelerates", Config{}, 1600 * ms, 6, true, []time.Duration{1500 * ms, 1312500 * time.Microsecond,
			1066406250, 799804687, 549865722, 343666076}},
		{"cut at most half", Config{}, 1600 * ms, 10, true, nil},
		{"not while demand is below the pace", Config{}, 1600 * ms, 3, false, []time.Duration{1600 * ms, 1600 * ms, 1600 * ms}},
		{"never below Floor", Config{Floor: 1500 * ms}, 1600 * ms, 3, true, []time.Duration{1500 * ms, 1500 * ms, 1500 * ms}},
		{"below 1ms goes to Floor", Config{Floor: 0}, 1100 * time.Microsecond, 2, true, []time.Duration{1031250, 0}},
		{"custom Relax and RelaxRun", Config{Relax: 0.5, RelaxRun: 2}, 1600 * ms, 2, true, []time.Duration{800 * ms, 400 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := relaxSteps(tt.cfg, tt.from, tt.runs, tt.queued)
			if tt.want == nil {
				for i := 8; i < len(got); i++ {
					if got[i] != got[i-1]/2 {
						t.Errorf("step %d: %v after %v, want half", i+1, got[i], got[i-1])
					}
				}
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("spacing after each run %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAdaptiveRejectionRestartsRelaxation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		a := g.ctl.(*adaptive)
		c := a.cfg
		reject(t, g, 1) // spacing 1s
		a.mu.Lock()
		a.queue = []*waiter{{}}
		for range 2*c.RelaxRun + 3 {
			a.succeeded(time.Now())
		}
		if a.spacing != 820312500 || a.streak != 3 {
			t.Errorf("spacing %v streak %d, want 1s*15/16*14/16, 3", a.spacing, a.streak)
		}
		a.queue = nil
		a.mu.Unlock()
		reject(t, g, 1)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.queue = []*waiter{{}}
		if a.streak != 0 || a.steps != 0 {
			t.Errorf("streak %d steps %d after a rejection, want 0, 0", a.streak, a.steps)
		}
		before := a.spacing
		for range c.RelaxRun {
			a.succeeded(time.Now())
		}
		if want := before * 15 / 16; a.spacing != want {
			t.Errorf("first step after a rejection: %v, want %v (a 1/16 cut again)", a.spacing, want)
		}
	})
}

func TestAdaptiveRetryAfterOnAStaleReportStillWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		t0 := time.Now()
		p, _ := take(t, g, t0)
		p.Succeeded()
		p.Forbidden(7 * time.Second) // a second report: no slot, no widening, but Retry-After holds
		if _, at := take(t, g, t0); at != 7*time.Second {
			t.Errorf("next start at %v, want 7s", at)
		}
		if s := g.Snapshot(); s.Spacing != 0 || s.Window != 2 {
			t.Errorf("spacing %v window %d, want 0, 2 (a stale report does not halve)", s.Spacing, s.Window)
		}
	})
}

func TestAdaptiveUnreportedPermitExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{InitialWindow: 1, Lease: 10 * time.Second})
		t0 := time.Now()
		lost, _ := take(t, g, t0) // never reported in time
		p, at := take(t, g, t0)
		if at != 10*time.Second {
			t.Errorf("start behind an unreported permit at %v, want 10s (its lease)", at)
		}
		lost.Succeeded() // too late: the slot is no longer its own
		if s := g.Snapshot(); s.InFlight != 1 || s.Successes != 1 {
			t.Errorf("in flight %d successes %d, want 1, 1", s.InFlight, s.Successes)
		}
		p.Succeeded()
		p.Succeeded() // twice: harmless
		if s := g.Snapshot(); s.InFlight != 0 || s.Window != 1 {
			t.Errorf("in flight %d window %d, want 0, 1 (one success counted: half a step of slow start)", s.InFlight, s.Window)
		}
	})
}

func TestAdaptiveCancelledWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		t0 := time.Now()
		reject(t, g, 1) // spacing 1s; next start at 1s
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		if _, err := g.Wait(ctx); err != context.DeadlineExceeded {
			t.Errorf("Wait = %v, want context.DeadlineExceeded unwrapped", err)
		}
		if at := time.Since(t0); at != 500*time.Millisecond {
			t.Errorf("cancelled Wait returned at %v, want 500ms", at)
		}
		if _, at := take(t, g, t0); at != time.Second {
			t.Errorf("start after a cancelled wait at %v, want 1s", at)
		}
		if s := g.Snapshot(); s.Queued != 0 || s.Starts != 2 || s.Waited != time.Second {
			t.Errorf("queued %d starts %d waited %v, want 0, 2, 1s", s.Queued, s.Starts, s.Waited)
		}
	})
}

func TestAdaptiveCancelledHeadWakesTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{InitialWindow: 1})
		t0 := time.Now()
		held, _ := take(t, g, t0)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { _, err := g.Wait(ctx); errc <- err }() // head of the line, waiting for the slot
		synctest.Wait()
		later := make(chan time.Duration, 1)
		go func() {
			p, err := g.Wait(t.Context())
			if err != nil {
				t.Errorf("Wait: %v", err)
			}
			later <- time.Since(t0)
			p.Succeeded()
		}()
		synctest.Wait()
		time.Sleep(time.Second)
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
		time.Sleep(time.Second)
		held.Succeeded()
		if at := <-later; at != 2*time.Second {
			t.Errorf("the caller behind a cancelled head started at %v, want 2s (when the slot freed)", at)
		}
	})
}

func TestConnectAdaptiveRetriesUntilAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		t0 := time.Now()
		forbidden := &originForbidden{msg: "slow down"}
		// Two refusals, not three: a third over two seconds would mean a closed origin.
		steps := []step{{after: handshake, err: forbidden}, {after: handshake, err: forbidden}, {after: handshake}}
		var attempts []time.Duration
		conn, res, err := Connect(t.Context(), g, ReferencePolicy(), script(t, t0, steps, &attempts))
		if conn != "conn3" || err != nil {
			t.Fatalf("Connect = %q, %v; want conn3, nil", conn, err)
		}
		// Paced by the gate, no cooldown: 1s (nothing accepted yet), then x1.25, each from the
		// rejection's report.
		want := []time.Duration{0, 1001 * time.Millisecond, 2252 * time.Millisecond}
		if !slices.Equal(attempts, want) {
			t.Errorf("attempts began at %v, want %v", attempts, want)
		}
		if res.Attempts != 3 || res.Waited != want[2]-2*handshake {
			t.Errorf("Result %+v, want 3 attempts, waited %v", res, want[2]-2*handshake)
		}
	})
}

func TestConnectAdaptiveRetriesBounded(t *testing.T) {
	always := func(n *int) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			*n++
			return "", &originForbidden{msg: "always"}
		}
	}
	// Cancellation (not a deadline) still returns ctx.Err().
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Max: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		_, _, err := Connect(ctx, g, Policy{}, func(ctx context.Context) (string, error) {
			cancel()
			return "", &originForbidden{msg: "always"}
		})
		if err != context.Canceled {
			t.Errorf("Connect after cancel = %v, want context.Canceled", err)
		}
	})
	tests := []struct {
		name     string
		deadline time.Duration // of ctx; 0 = none
		budget   time.Duration
		wantAt   time.Duration
		wantN    int
	}{
		// The second refusal (at 1s) pushes the next start to 2.25s, past 1.5s: answered at once.
		{"the deadline first", 1500 * time.Millisecond, time.Minute, time.Second, 2},
		{"the budget first", time.Minute, 1500 * time.Millisecond, time.Second, 2},
		{"the budget, no deadline", 0, 1500 * time.Millisecond, time.Second, 2},
		{"the budget ends while waiting: a start due then is too late", 0, 2 * time.Second, 2 * time.Second, 2},
		{"a short budget", 0, 500 * time.Millisecond, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Config{Max: time.Second})
				t0 := time.Now()
				ctx := t.Context()
				if tt.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				n := 0
				_, res, err := Connect(ctx, g, Policy{ForbiddenBudget: tt.budget}, always(&n))
				var fb *originForbidden
				if !errors.As(err, &fb) || fb.msg != "always" {
					t.Errorf("Connect = %v, want the last 403", err)
				}
				if at := time.Since(t0); at != tt.wantAt {
					t.Errorf("returned at %v, want %v", at, tt.wantAt)
				}
				if n != tt.wantN || res.Attempts != tt.wantN {
					t.Errorf("%d dials, %d attempts; want %d (one a second)", n, res.Attempts, tt.wantN)
				}
			})
		})
	}
}

func TestConnectAdaptiveRetryAfterBeyondBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		t0 := time.Now()
		steps := []step{{err: &originForbidden{msg: "later", retryAfter: time.Minute}}}
		var attempts []time.Duration
		_, _, err := Connect(t.Context(), g, Policy{}, script(t, t0, steps, &attempts))
		var fb *originForbidden
		if !errors.As(err, &fb) || fb.msg != "later" {
			t.Errorf("Connect = %v, want the 403", err)
		}
		if at := time.Since(t0); at != 0 {
			t.Errorf("returned at %v, want at once: no start can come within the 10s budget", at)
		}
	})
}

func TestConnectAdaptiveRetryAfterWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		t0 := time.Now()
		steps := []step{{err: &originForbidden{retryAfter: 9 * time.Second}}, {}}
		var attempts []time.Duration
		if _, _, err := Connect(t.Context(), g, Policy{}, script(t, t0, steps, &attempts)); err != nil {
			t.Fatal(err)
		}
		if want := []time.Duration{0, 9 * time.Second}; !slices.Equal(attempts, want) {
			t.Errorf("attempts began at %v, want %v", attempts, want)
		}
	})
}

func TestConnectAdaptiveOtherErrorsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		refused := errors.New("connection refused")
		var attempts []time.Duration
		_, res, err := Connect(t.Context(), g, Policy{}, script(t, time.Now(), []step{{err: refused}}, &attempts))
		if err != refused || res.Attempts != 1 {
			t.Errorf("Connect = %v after %d attempts, want the error verbatim after 1", err, res.Attempts)
		}
		if s := g.Snapshot(); s.Failures != 1 || s.InFlight != 0 || s.Spacing != 0 {
			t.Errorf("snapshot %+v, want 1 failure, nothing in flight, spacing 0", s)
		}
	})
}

func TestConnectAdaptiveRetryKeepsItsPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{InitialWindow: 1})
		var (
			mu    sync.Mutex
			order []string
			wg    sync.WaitGroup
		)
		dial := func(name string, fail *bool) func(context.Context) (string, error) {
			return func(context.Context) (string, error) {
				time.Sleep(handshake)
				mu.Lock()
				defer mu.Unlock()
				order = append(order, name)
				if *fail {
					*fail = false
					return "", &originForbidden{}
				}
				return name, nil
			}
		}
		first, never := true, false
		wg.Go(func() { Connect(t.Context(), g, Policy{}, dial("a", &first)) })
		synctest.Wait()
		for _, name := range []string{"b", "c"} {
			time.Sleep(time.Microsecond) // arrives while a's handshake is in flight
			wg.Go(func() { Connect(t.Context(), g, Policy{}, dial(name, &never)) })
			synctest.Wait()
		}
		wg.Wait()
		// a is rejected; its retry goes before b and c, who arrived after it.
		if want := []string{"a", "a", "b", "c"}; !slices.Equal(order, want) {
			t.Errorf("dial order %v, want %v", order, want)
		}
	})
}

func TestAdaptiveWaitDoesNotAllocate(t *testing.T) {
	g := New(Config{})
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		p, err := g.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Succeeded()
		p.Failed()
		p.Forbidden(0) // reported before: counted, no effect
	})
	if allocs != 0 {
		t.Errorf("Wait and the reports allocate %v times per start, want 0", allocs)
	}
	if s := g.Snapshot(); s.Spacing != 0 || s.InFlight != 0 {
		t.Errorf("spacing %v, in flight %d; want 0, 0", s.Spacing, s.InFlight)
	}
}
