//go:build race

package sim

// raceEnabled: the race detector slows a world about tenfold.
const raceEnabled = true
