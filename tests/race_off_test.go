//go:build !race

package tests

// raceEnabled: see race_on_test.go.
const raceEnabled = false
