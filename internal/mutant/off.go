//go:build !actorlock_mutants

// Package mutant re-introduces, in test builds only, defects the library
// once had, so that the simulation (tests/sim) can show it still catches
// each of them. Built without the actorlock_mutants tag, On is a constant
// false and the compiler drops every guarded branch.
package mutant

// On reports whether defect n is switched back on.
func On(int) bool { return false }
