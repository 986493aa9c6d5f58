//go:build race

package sim

// raceEnabled: the race detector slows everything ~5x; the CI run is
// shorter and the timing tolerances wider.
const raceEnabled = true
