//go:build !race

package codextest

const raceEnabled = false
