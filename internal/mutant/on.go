//go:build actorlock_mutants

package mutant

import (
	"os"
	"strconv"
)

// active is the defect ACTORLOCK_MUTANT names (0: none), read once.
var active, _ = strconv.Atoi(os.Getenv("ACTORLOCK_MUTANT"))

// On reports whether defect n is switched back on: n = ACTORLOCK_MUTANT.
// The numbers are those of the seven lock-runtime defects found by review
// (CHANGELOG, 0.x "Fixed"): 1 hand-off during a give-back, 2 re-entry
// merged into a lost hold, 3 retried unlock misjudged after a re-entry,
// 4 abandoned release renewed for ever, 5 second Unlock while one is in
// flight, 6 fair re-entry pushed to the local front, 7 tiny lease accepted.
func On(n int) bool { return active == n }
