package gate

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// seedsFlag overrides fleetSeeds: go test -v -run FleetTargetsAtScale ./gate -fleet.seeds 40.
var seedsFlag = flag.Int("fleet.seeds", 0, "runs per figure of the fleet simulations (0: the default, fewer under -race)")

func TestMain(m *testing.M) {
	flag.Parse()
	if *seedsFlag < 0 {
		os.Stderr.WriteString("-fleet.seeds must not be negative\n")
		os.Exit(2)
	}
	if *seedsFlag > 0 {
		fleetSeeds = *seedsFlag
	}
	goleak.VerifyTestMain(m)
}
