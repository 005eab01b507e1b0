package gate

import (
	"fmt"
	"testing"
	"time"
)

// TestFleetTargetsAtScale checks issue 26's burst targets in virtual time, in the world of
// TestFleetTargets: 32 gates on one machine, and 8 gates whose hosts are 10 ms and 25 ms from
// NATS and the origin (one way: signals take 2·away, requests away more; a handshake a round trip
// for TCP's and one for the upgrade, as in `codexpool bench --hosts`). 4 gates 25 ms away are
// logged beside them. "refused" is the count per burst, "> 15 %" the runs above the target:
// go test -v -run FleetTargetsAtScale ./gate (-fleet.seeds 40 for docs/gate-design.md's table).
func TestFleetTargetsAtScale(t *testing.T) {
	tb := table{head: []string{"target", "N", "away", "ok", "wall s", "p95 s", "refused", "> 15 %", "rejected %", "req/s"}}
	for _, tt := range []struct {
		n     int
		away  time.Duration
		check bool
	}{
		{32, 0, true},
		{8, 10 * time.Millisecond, true},
		{8, 25 * time.Millisecond, true},
		{4, 25 * time.Millisecond, false},
	} {
		s := seeds(t, fleetSeeds, func(seed uint64) fleetResult {
			return runFleet(tt.n, burst(60), fleetOpts{shared: true, seed: seed, away: tt.away, tcp: tt.away > 0})
		})
		above := 0
		for _, r := range s.runs {
			if r.rejectedShare() > 0.15 {
				above++
			}
		}
		tb.add("60-burst", fmt.Sprint(tt.n), tt.away.String(), s.fmt(okOf, "%.0f"), s.fmt(wallOf, "%.1f"), s.fmt(p95Of, "%.1f"),
			s.fmt(refusedOf, "%.1f"), fmt.Sprintf("%d of %d", above, len(s.runs)), s.fmt(rejOf, "%.1f"), s.fmt(rpsOf, "%.2f"))
		if !tt.check {
			continue
		}
		for _, r := range s.runs {
			if r.ok != 60 || r.wall > 15*time.Second {
				t.Errorf("60-burst, N=%d, %v away: %v; want 60/60 within 15s", tt.n, tt.away, r)
			}
		}
		if m, _, _ := s.col(rejOf); m > 15 && meansHold() {
			t.Errorf("60-burst, N=%d, %v away: rejected %.1f%% of attempts on average, want <= 15%%", tt.n, tt.away, m)
		}
	}
	tb.log(t)
}

func refusedOf(r fleetResult) float64 { return float64(r.rejected) }
