package gate

import (
	"fmt"
	"testing"
	"time"
)

const fleetSeeds = 5

func TestFleetTargets(t *testing.T) {
	tb := table{head: []string{"target", "N", "scope", "ok", "wall s", "rejected %", "goodput/s"}}
	for _, n := range []int{1, 4, 8} {
		for _, shared := range []bool{false, true} {
			scope := map[bool]string{false: "process", true: "shared"}[shared]
			s := seeds(t, fleetSeeds, func(seed uint64) fleetResult {
				return runFleet(n, burst(60), fleetOpts{shared: shared, seed: seed})
			})
			tb.add("1: 60-burst", fmt.Sprint(n), scope, s.fmt(okOf, "%.0f"), s.fmt(wallOf, "%.1f"), s.fmt(rejOf, "%.1f"), "")
		}
	}
	for _, n := range []int{4, 8} {
		for _, shared := range []bool{false, true} {
			scope := map[bool]string{false: "process", true: "shared"}[shared]
			s := seeds(t, fleetSeeds, func(seed uint64) fleetResult {
				return runFleet(n, openLoop(10, 30*time.Second), fleetOpts{shared: shared, seed: seed, deadline: 10 * time.Minute})
			})
			tb.add("2: 10/s for 30s", fmt.Sprint(n), scope, s.fmt(okOf, "%.0f"), s.fmt(wallOf, "%.1f"), s.fmt(windowRejOf, "%.1f"), s.fmt(goodputOf, "%.2f"))
		}
	}
	tb.log(t)
}
