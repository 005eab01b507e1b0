//go:build race

package gate

// The race detector slows the simulations tenfold: fewer runs per figure (and the 64-gate
// fleets of fleet_wide_test.go are built only without it).
func init() { fleetSeeds = 2 }
