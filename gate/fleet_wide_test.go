//go:build !race

package gate

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// The 64- and 100-gate fleets take minutes under the race detector (45 s without it), so they
// are built only without it: .ci/run runs them in its fleet step, go test -race leaves them out.

// TestFleetOf64And100Share: a fleet of up to 128 gates per account shares fully (issue 43; the
// table held 32 before, so each of 64 gates counted 32 peers and paced by half the fleet). 64 and
// 100 gates on one machine take a 60-burst from the 5/s burst-5 origin as 32 do, and at the end
// every gate counts every other as a live peer.
func TestFleetOf64And100Share(t *testing.T) {
	for _, n := range []int{64, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var peers []int
				r := runFleet(n, burst(60), fleetOpts{shared: true, seed: 1, observeOf: func(gates []*Gate) {
					for _, g := range gates {
						peers = append(peers, g.Snapshot().Peers)
					}
				}})
				t.Logf("%d gates: %v, wall %v", n, r, r.wall.Round(time.Millisecond))
				for i, p := range peers {
					if p != n-1 {
						t.Errorf("gate %d counts %d live peers at the end, want %d (every other gate)", i, p, n-1)
						break
					}
				}
				if r.ok != 60 || r.wall > 15*time.Second || r.rejectedShare() > 0.15 {
					t.Errorf("%d gates, 60-burst: %v; want 60/60 within 15s, <= 15%% of the attempts refused", n, r)
				}
			})
		})
	}
}

// TestFleetOf64Sustained: 64 gates on one machine, twice the origin's rate (10/s for 30 s on the
// 5/s burst-5 origin) — no request runs out of its ForbiddenBudget. In a fleet this wide a refused
// request's retry waits for the other gates' turns at most two spacings beyond its own pace;
// with a spacing per gate (the widest, 8 s, at 64 gates) this seed answered
// 4 requests with their last 403.
func TestFleetOf64Sustained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := runFleet(64, openLoop(10, 30*time.Second), fleetOpts{shared: true, seed: 3, deadline: 3 * time.Minute})
		t.Logf("%v, goodput %.2f/s, p95 %.1fs", r.simResult, r.goodput, r.pct(0.95))
		if r.failed > 0 || r.ok != 300 {
			t.Errorf("64 gates, 10/s for 30 s: %v; want 300/300, no request answered 403", r)
		}
		if r.goodput < 4.5 {
			t.Errorf("goodput %.2f/s, want >= 4.5 (90 %% of the origin's 5)", r.goodput)
		}
	})
}

// TestFleetOf8HostsBy4: 32 gates on 8 hosts 25 ms from NATS and the origin (4 workers each, as
// `codexpool bench --hosts 8 --workers 32`), a 60-burst on the 5/s burst-5 origin. Every run
// serves all 60 within 15 s; at most 15 % of the attempts are refused on average and in all but
// one run of the ten (100 runs: 6.4 refused a burst, one run at 11 of 71, 15.5 %). The gates left
// out of slow start's window each wait by their own rank (TestLeftOutUntilByRank): when a window's
// worth of them waited alike, they started together about 480 ms in, just as slow start had
// emptied the bucket, and 8-9 were refused at once (60 runs: 7.25 a burst, 5 runs above 15 %, up
// to 15 refused).
func TestFleetOf8HostsBy4(t *testing.T) {
	s := seeds(t, fleetSeeds, func(seed uint64) fleetResult {
		return runFleet(32, burst(60), fleetOpts{shared: true, seed: seed, away: 25 * time.Millisecond, tcp: true})
	})
	above := 0
	for i, r := range s.runs {
		if r.ok != 60 || r.wall > 15*time.Second {
			t.Errorf("run %d: %v; want 60/60 within 15s", i+1, r)
		}
		if r.rejectedShare() > 0.15 {
			above++
			t.Logf("run %d: %v, above 15 %%", i+1, r)
		}
	}
	m, lo, hi := s.col(refusedOf)
	rej, _, _ := s.col(rejOf)
	w, _, wh := s.col(wallOf)
	t.Logf("%d runs: refused %.1f (%.0f-%.0f) a burst, %.1f %% of the attempts; wall %.1f s (at most %.1f); %d above 15 %%",
		len(s.runs), m, lo, hi, rej, w, wh, above)
	if rej > 15 || above > max(1, len(s.runs)/10) {
		t.Errorf("refused %.1f %% on average, %d of %d runs above 15 %%; want <= 15 %% and at most one run in ten above", rej, above, len(s.runs))
	}
}
