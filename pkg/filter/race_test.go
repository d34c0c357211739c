//go:build race

package filter

// raceEnabled: under the race detector sync.Pool drops items on purpose,
// so allocation counts mean nothing.
const raceEnabled = true
