package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestClosedOriginTargets checks issue 12's targets for an origin that refuses every upgrade, in
// virtual time, with the simulated origin (go test -v -run ClosedOriginTargets ./gate).
func TestClosedOriginTargets(t *testing.T) {
	t.Run("one request, no deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			o := newBucketOrigin(0, 0)
			g := New(Config{})
			t0 := time.Now()
			_, res, err := Connect(context.Background(), g, Policy{}, o.dial)
			var fb *originForbidden
			at := time.Since(t0)
			t.Logf("answered %v after %v, %d attempts", err, at.Round(time.Millisecond), res.Attempts)
			if !errors.As(err, &fb) || at > 10*time.Second {
				t.Errorf("got %v after %v, want the 403 within 10s", err, at)
			}
			if !g.Snapshot().Closed {
				t.Errorf("gate not closed after %d refusals over %v", res.Attempts, at)
			}
		})
	})
	t.Run("50 concurrent, then the origin reopens", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			o := newBucketOrigin(0, 0)
			g := New(Config{})
			t0 := time.Now()
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				latest time.Duration
				errs   int
			)
			for range 50 {
				wg.Go(func() {
					_, _, err := Connect(context.Background(), g, Policy{}, o.dial)
					var fb Forbidden
					mu.Lock()
					defer mu.Unlock()
					if errors.As(err, &fb) {
						errs++
					}
					latest = max(latest, time.Since(t0))
				})
			}
			wg.Wait()
			_, rej := o.totals()
			t.Logf("50 concurrent: %d answered 403, the last after %v; %d upgrade attempts", errs, latest.Round(time.Millisecond), rej)
			if errs != 50 || latest > 10*time.Second || rej > 15 {
				t.Errorf("got %d 403s, the last at %v, %d attempts; want 50 within 10s, <= 15 attempts", errs, latest, rej)
			}
			// The origin opens again: a request is served within 10 s (the next probe slot).
			o.setLimit(5, 5)
			t1 := time.Now()
			_, _, err := Connect(context.Background(), g, Policy{}, o.dial)
			at := time.Since(t1)
			t.Logf("after reopening: %v after %v", err, at.Round(time.Millisecond))
			if err != nil || at > 10*time.Second {
				t.Errorf("got %v after %v, want success within 10s", err, at)
			}
			if g.Snapshot().Closed {
				t.Error("gate still closed after an accepted upgrade")
			}
		})
	})
}

// TestClosedOriginFleet: 50 requests spread over 4 and 8 gates that share what they see, against
// an origin that refuses everything: all are answered within 10 s, and the fleet does not knock
// N times as often as one gate.
func TestClosedOriginFleet(t *testing.T) {
	tb := table{head: []string{"N", "scope", "answered 403", "last answer s", "upgrade attempts"}}
	for _, n := range []int{1, 4, 8} {
		for _, shared := range []bool{false, true} {
			s := seeds(t, 5, func(seed uint64) fleetResult {
				return runFleet(n, burst(50), fleetOpts{shared: shared, seed: seed, closed: true})
			})
			for _, r := range s.runs {
				if r.failed != 50 || r.answered > 10*time.Second {
					t.Errorf("N=%d shared=%v: %d answered 403, the last after %v; want 50 within 10s", n, shared, r.failed, r.answered)
				}
			}
			tb.add(fmt.Sprint(n), map[bool]string{false: "process", true: "shared"}[shared],
				s.fmt(func(r fleetResult) float64 { return float64(r.failed) }, "%.0f"),
				s.fmt(func(r fleetResult) float64 { return r.answered.Seconds() }, "%.2f"),
				s.fmt(func(r fleetResult) float64 { return float64(r.rejected) }, "%.1f"))
		}
	}
	tb.log(t)
}

// closeGate makes g see a closed origin: refusals at 0, 1s and 2.25s of sequential attempts.
func closeGate(t *testing.T, g *Gate) {
	t.Helper()
	reject(t, g, closedRefusals)
	if !g.Snapshot().Closed {
		t.Fatal("gate not closed")
	}
}

func TestClosedRule(t *testing.T) {
	tests := []struct {
		name   string
		refuse func(t *testing.T, g *Gate)
		want   bool
	}{
		{"three paced refusals", func(t *testing.T, g *Gate) { reject(t, g, 3) }, true},
		{"two paced refusals", func(t *testing.T, g *Gate) { reject(t, g, 2) }, false},
		{"a burst of 30 refused together", func(t *testing.T, g *Gate) {
			startAll(t, g, time.Now(), 30, func(p Permit) { p.Forbidden(0) })
		}, false},
		{"an acceptance in between", func(t *testing.T, g *Gate) {
			reject(t, g, 2)
			succeed(t, g, 1)
			reject(t, g, 2)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Config{InitialWindow: 1024})
				tt.refuse(t, g)
				if got := g.Snapshot().Closed; got != tt.want {
					t.Errorf("closed = %v, want %v", got, tt.want)
				}
			})
		})
	}
}

func TestClosedAnswersWaitingCallersAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		reject(t, g, 2) // 0 and 1s; the next start at 2.25s
		p, _ := take(t, g, time.Now())
		t0 := time.Now()
		errc := make(chan error, 5)
		for range 5 {
			go func() { _, err := g.Wait(t.Context()); errc <- err }()
		}
		synctest.Wait()
		p.Forbidden(0) // the third refusal, 2.25s after the first: closed
		for range 5 {
			if err := <-errc; err != ErrClosed {
				t.Errorf("waiting caller got %v, want ErrClosed", err)
			}
		}
		if at := time.Since(t0); at != 0 {
			t.Errorf("waiting callers answered after %v, want at once", at)
		}
	})
}

func TestClosedOneProberAtTheWidestSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		closeGate(t, g)
		t0 := time.Now() // the last refusal
		probed := make(chan time.Duration, 1)
		go func() {
			p, err := g.Wait(t.Context())
			if err != nil {
				t.Errorf("prober: %v", err)
				return
			}
			at := time.Since(t0)
			p.Succeeded() // before the report, so that the gate is open when the test looks
			probed <- at
		}()
		synctest.Wait()
		if _, err := g.Wait(t.Context()); err != ErrClosed {
			t.Errorf("second caller while a prober waits: %v, want ErrClosed", err)
		}
		if at := <-probed; at != 8*time.Second {
			t.Errorf("probe at %v after the last refusal, want 8s (Max)", at)
		}
		if g.Snapshot().Closed {
			t.Error("an accepted probe did not reopen the gate")
		}
		succeed(t, g, 1) // open again: no ErrClosed
	})
}

func TestClosedProbeBeyondDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		closeGate(t, g)
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, err := g.Wait(ctx); err != ErrClosed {
			t.Errorf("Wait with a deadline before the probe slot = %v, want ErrClosed", err)
		}
		if at := time.Since(t0); at != 0 {
			t.Errorf("answered after %v, want at once", at)
		}
		// A Connect caller's own budget counts too: Policy 5s < the 8s to the slot.
		_, _, err := Connect(t.Context(), g, Policy{ForbiddenBudget: 5 * time.Second}, func(context.Context) (int, error) {
			t.Error("dialled a closed origin beyond the budget")
			return 0, nil
		})
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Connect = %v, want an error wrapping ErrClosed (no 403 of Connect's own)", err)
		}
		var fb Forbidden
		if !errors.As(err, &fb) {
			t.Errorf("Connect = %v, want a Forbidden", err)
		}
	})
}

func TestClosedProberCancelFreesTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		closeGate(t, g)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { _, err := g.Wait(ctx); errc <- err }()
		synctest.Wait()
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Errorf("prober = %v, want context.Canceled", err)
		}
		p, err := g.Wait(t.Context()) // the next caller may probe
		if err != nil {
			t.Fatalf("next prober: %v", err)
		}
		p.Forbidden(0)
		if s := g.Snapshot(); !s.Closed || s.Queued != 0 || s.InFlight != 0 {
			t.Errorf("snapshot %+v, want still closed, nothing queued or in flight", s)
		}
	})
}

func TestClosedConnectReturnsLast403(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		n := 0
		dial := func(context.Context) (int, error) {
			n++
			return 0, &originForbidden{msg: "blocked"}
		}
		if _, _, err := Connect(t.Context(), g, Policy{}, dial); err == nil {
			t.Fatal("Connect succeeded against a closed origin")
		}
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, res, err := Connect(ctx, g, Policy{}, dial)
		var fb *originForbidden
		if !errors.As(err, &fb) || fb.msg != "blocked" || res.Attempts != 0 || time.Since(t0) != 0 {
			t.Errorf("Connect = %v after %d attempts, %v; want the last 403 at once, no attempt", err, res.Attempts, time.Since(t0))
		}
	})
}

// TestCutOffGateClosesOnlyOnceAlone: a gate that has just lost its peers (cut off from the
// transport, still reaching the origin) may be refused because the fleet it no longer hears of
// uses the limit up; it calls the origin closed only once it has been alone for the widest
// spacing.
func TestCutOffGateClosesOnlyOnceAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{})
		p := newFakePeer(7)
		trust(t, g, p)
		time.Sleep(peerLive * interval) // the peer falls silent: this gate is alone now
		lost := time.Now()
		refuse := func() {
			t.Helper()
			pm, err := g.Wait(t.Context())
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			pm.Forbidden(0)
		}
		for range 4 { // more than enough refusals, over more than two RateWindows, to close
			refuse()
		}
		if s := g.Snapshot(); s.Closed || s.Peers != 0 {
			t.Fatalf("%v after losing its peer: closed %v, peers %d; want open, alone", time.Since(lost), s.Closed, s.Peers)
		}
		time.Sleep(time.Until(lost.Add(DefaultMax)))
		refuse()
		if !g.Snapshot().Closed {
			t.Errorf("alone for %v and refused: not closed, want closed", time.Since(lost))
		}
	})
}
