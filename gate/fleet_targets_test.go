package gate

import (
	"fmt"
	"testing"
	"time"
)

// fleetSeeds is how many runs (each with its own random spread of requests over the gates, and
// its own handshake times) every figure below is the mean of; the range is in brackets.
var fleetSeeds = 10

// TestFleetTargets checks issue 12's targets for gates that share one upgrade limit (a 5/s burst-5
// origin, 1 ms handshakes), in virtual time, and logs the figures of process scope (no bus: each
// gate on its own, as before the shared state) beside those of shared scope (an in-memory bus,
// ~1 ms latency), in the world of the bench with worker processes (see fleetOpts) and in the
// ideal one of the first simulations: go test -v -run FleetTargets ./gate.
//
// The figures are the bench's: wall is the last upgrade, req/s is what `codexpool bench` reports
// (requests served over the wall time plus the origin's 1 s generation), rejected % is of all
// attempts; goodput/s (upgrades accepted over the arrivals' span) is shown beside it.
func TestFleetTargets(t *testing.T) {
	tb := table{head: []string{"target", "N", "scope", "ok", "wall s", "p50 s", "p95 s", "rejected %", "req/s", "goodput/s", "signals/s"}}
	scopes := []struct {
		name string
		o    fleetOpts
	}{
		{"process", fleetOpts{}},
		{"shared", fleetOpts{shared: true}},
		{"shared, 10% lost", fleetOpts{shared: true, loss: 0.1}},
		{"shared, ideal", fleetOpts{shared: true, ideal: true}},
	}
	burstOf := map[string]stats{}
	for _, n := range []int{1, 4, 8} {
		for _, sc := range scopes {
			s := seeds(t, fleetSeeds, func(seed uint64) fleetResult {
				o := sc.o
				o.seed = seed
				return runFleet(n, burst(60), o)
			})
			burstOf[fmt.Sprint(n, sc.name)] = s
			tb.add("1: 60-burst", fmt.Sprint(n), sc.name, s.fmt(okOf, "%.0f"), s.fmt(wallOf, "%.1f"), s.fmt(p50Of, "%.1f"), s.fmt(p95Of, "%.1f"), s.fmt(rejOf, "%.1f"), s.fmt(rpsOf, "%.2f"), "", s.fmt(signalRate, "%.0f"))
			if !sc.o.shared {
				continue
			}
			// Every run serves every request within 15 s; the rejected share varies more from run
			// to run (which gate a request lands on, handshake times), so the target is on the
			// mean of the runs, and the table shows the worst.
			for _, r := range s.runs {
				if r.ok != 60 || r.wall > 15*time.Second {
					t.Errorf("60-burst, N=%d, %s: %v; want 60/60 within 15s", n, sc.name, r)
				}
			}
			if m, _, _ := s.col(rejOf); m > 15 && meansHold() {
				t.Errorf("60-burst, N=%d, %s: rejected %.1f%% of attempts on average, want <= 15%%", n, sc.name, m)
			}
		}
	}
	for _, n := range []int{4, 8} {
		for _, sc := range scopes {
			s := seeds(t, fleetSeeds/2, func(seed uint64) fleetResult {
				o := sc.o
				o.seed, o.deadline = seed, 10*time.Minute
				return runFleet(n, openLoop(10, 30*time.Second), o)
			})
			tb.add("2: 10/s for 30s", fmt.Sprint(n), sc.name, s.fmt(okOf, "%.0f"), s.fmt(wallOf, "%.1f"), s.fmt(p50Of, "%.1f"), s.fmt(p95Of, "%.1f"), s.fmt(rejOf, "%.1f"), s.fmt(rpsOf, "%.2f"), s.fmt(goodputOf, "%.2f"), s.fmt(signalRate, "%.0f"))
			if !sc.o.shared {
				continue
			}
			for _, r := range s.runs {
				if rpsOf(r) < 4.5 || r.rejectedShare() > 0.10 || r.ok != 300 {
					t.Errorf("10/s for 30s, N=%d, %s: %v, %.2f req/s; want 300/300, >= 4.5 req/s, rejected <= 10%%", n, sc.name, r, rpsOf(r))
				}
			}
		}
	}
	// 4: a flooded bus. 5: one gate cut off from the bus, from the start or after 3 s.
	for _, n := range []int{4, 8} {
		clean := burstOf[fmt.Sprint(n, "shared")]
		s := seeds(t, fleetSeeds, func(seed uint64) fleetResult {
			return runFleet(n, burst(60), fleetOpts{shared: true, seed: seed, flood: 10_000})
		})
		tb.add("4: 60-burst, 10k bogus/s", fmt.Sprint(n), "shared", s.fmt(okOf, "%.0f"), s.fmt(wallOf, "%.1f"), s.fmt(p50Of, "%.1f"), s.fmt(p95Of, "%.1f"), s.fmt(rejOf, "%.1f"), s.fmt(rpsOf, "%.2f"), "", s.fmt(signalRate, "%.0f"))
		cw, _, _ := clean.col(wallOf)
		cr, _, _ := clean.col(rejOf)
		fw, _, _ := s.col(wallOf)
		fr, _, _ := s.col(rejOf)
		if (fw > 1.1*cw || fr > 1.1*cr+1) && meansHold() {
			t.Errorf("flooded 60-burst, N=%d: wall %.1fs, rejected %.1f%%; clean %.1fs, %.1f%%: want within 10%% (rejections within 10%% + 1 point)", n, fw, fr, cw, cr)
		}
		for _, cutAfter := range []time.Duration{0, 3 * time.Second} {
			s := seeds(t, fleetSeeds, func(seed uint64) fleetResult {
				return runFleet(n, burst(60), fleetOpts{shared: true, seed: seed, cutOne: true, cutAfter: cutAfter})
			})
			name := fmt.Sprintf("5: 60-burst, 1 gate cut off after %v", cutAfter)
			tb.add(name, fmt.Sprint(n), "shared", s.fmt(okOf, "%.0f"), s.fmt(wallOf, "%.1f"), s.fmt(p50Of, "%.1f"), s.fmt(p95Of, "%.1f"), s.fmt(rejOf, "%.1f"), s.fmt(rpsOf, "%.2f"), "", s.fmt(signalRate, "%.0f"))
			for _, r := range s.runs {
				if r.cutOK != r.cutTotal {
					t.Errorf("%s, N=%d: the cut-off gate served %d of its %d requests, want all", name, n, r.cutOK, r.cutTotal)
				}
			}
		}
	}
	tb.log(t)
}

// meansHold reports whether there are runs enough for a target on a mean to be checked: under
// the race detector (2 runs) a mean is one unlucky spread away from failing; the per-run checks
// still hold, and CI runs this test without the race detector too.
func meansHold() bool { return fleetSeeds >= 5 }

func signalRate(r fleetResult) float64 { return float64(r.signals) / (r.wall.Seconds() + 1) }

// rpsOf is the bench's req/s: requests served over the time to the last one's answer (its
// upgrade, then the origin's 1 s generation).
func rpsOf(r fleetResult) float64 { return float64(r.ok) / (r.wall.Seconds() + 1) }

// TestFleetHandBack measures whether handing a request back to the queue (to another gate,
// chosen at random, 2 ms later, at most 3 times) when Estimate says it would wait here over a
// second longer than at the best peer helps: go test -v -run FleetHandBack ./gate.
func TestFleetHandBack(t *testing.T) {
	tb := table{head: []string{"target", "N", "hand-back", "ok", "wall s", "p50 s", "p95 s", "rejected %", "goodput/s", "handed back"}}
	for _, n := range []int{4, 8} {
		for _, hb := range []time.Duration{0, time.Second} {
			name := map[bool]string{false: "never", true: "here > best + 1s"}[hb > 0]
			handed := 0
			s := seeds(t, fleetSeeds, func(seed uint64) fleetResult {
				r := runFleet(n, burst(60), fleetOpts{shared: true, seed: seed, handBack: hb})
				if r.ok != 60 {
					t.Errorf("%d gates, hand-back %s, seed %d: %d of 60 served; a hand-back must lose no request", n, name, seed, r.ok)
				}
				handed += r.handed
				return r
			})
			if hb == 0 && handed != 0 {
				t.Errorf("%d gates without hand-back: %d requests handed back", n, handed)
			}

			tb.add("60-burst", fmt.Sprint(n), name, s.fmt(okOf, "%.0f"), s.fmt(wallOf, "%.1f"), s.fmt(p50Of, "%.1f"), s.fmt(p95Of, "%.1f"), s.fmt(rejOf, "%.1f"), "", s.fmt(handedOf, "%.1f"))
			handed = 0
			s = seeds(t, fleetSeeds/2, func(seed uint64) fleetResult {
				r := runFleet(n, openLoop(10, 30*time.Second), fleetOpts{shared: true, seed: seed, handBack: hb, deadline: 10 * time.Minute})
				if r.ok != 300 {
					t.Errorf("%d gates at 10/s, hand-back %s, seed %d: %d of 300 served", n, name, seed, r.ok)
				}
				handed += r.handed
				return r
			})
			// Above the pool's rate some gate always runs behind: the rule must engage there.
			if hb > 0 && handed == 0 {
				t.Errorf("%d gates at 10/s with hand-back: no request handed back; the rule never engaged", n)
			}
			tb.add("10/s for 30s", fmt.Sprint(n), name, s.fmt(okOf, "%.0f"), s.fmt(wallOf, "%.1f"), s.fmt(p50Of, "%.1f"), s.fmt(p95Of, "%.1f"), s.fmt(windowRejOf, "%.1f"), s.fmt(goodputOf, "%.2f"), s.fmt(handedOf, "%.1f"))
		}
	}
	tb.log(t)
}

func handedOf(r fleetResult) float64 { return float64(r.handed) }
