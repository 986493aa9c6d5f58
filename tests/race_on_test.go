//go:build race

package tests

// raceEnabled: the race detector slows every goroutine hand-off, so timing
// bounds that measure the runtime's own latency get a race-build margin.
const raceEnabled = true
