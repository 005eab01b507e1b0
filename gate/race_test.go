//go:build race

package gate

// The race detector slows the simulations tenfold: fewer runs per figure.
func init() { fleetSeeds = 2 }
