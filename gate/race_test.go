//go:build race

package gate

// The race detector slows the simulations tenfold: fewer runs per figure, and the 64-gate
// fleets left to the run without it (skipWideUnderRace).
func init() { fleetSeeds, raceDetector = 2, true }
