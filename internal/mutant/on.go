//go:build actorlock_mutants

package mutant

import (
	"os"
	"strconv"
	"strings"
)

// active is the defects ACTORLOCK_MUTANT names, read once: one number, or
// several joined by "+" (a defect whose effect another fix masks, shown
// with that fix off too); none is 0.
var active = func() map[int]bool {
	on := map[int]bool{}
	for _, f := range strings.Split(os.Getenv("ACTORLOCK_MUTANT"), "+") {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			on[n] = true
		}
	}
	return on
}()

// On reports whether defect n is switched back on: ACTORLOCK_MUTANT names it.
// The numbers are those of the seven lock-runtime defects found by review
// (CHANGELOG, 0.x "Fixed"): 1 hand-off during a give-back, 2 re-entry
// merged into a lost hold, 3 retried unlock misjudged after a re-entry,
// 4 abandoned release renewed for ever, 5 second Unlock while one is in
// flight, 6 fair re-entry pushed to the local front, 7 tiny lease accepted;
// and issue 31's (exact-safety): 8 a release's retry that its first
// attempt cannot see (A), 9 a downgraded read valid as long as the write
// (B), 10 a grant overlapping its owner's give-back (C), 11 a release guard
// that its attempts outlive (D), 12 a local fair order that differs from
// the Redis queue (E), 13 a fair place that outlives a dead waiter by its
// whole wait (F), 14 a give-back of a WithOwner id held through two
// runtimes that releases the other's holds too (finding W), 15 a WithOwner
// id's hold ended lost because another runtime's release lowered its count
// (finding X), 16 a semaphore acquisition's unknown outcome not settled
// (issue 33 B), 17 settling that ends on a refused attempt (finding Y),
// 18 a delayed offer's retries under guards of their own (issue 33 A), 19
// the other direct calls' retries likewise (issue 33 D), 20 a pop whose
// reply was lost does not give its item back (issue 33 C), 21 a give-back
// that checks the owner's count only, not the fencing counter, so a
// retry that lands after the hold expired releases a fresh hold of the
// same WithOwner id (finding Z), 22 a release that runs while its owner's
// re-entry is being settled, releasing the fresh hold the re-entry started
// after the lock was deleted, reported as an Unlock of the deleted one
// (finding AA), 23 a release's cut validity running out ends the whole
// hold as lost, the grant being released included (red-team finding
// RT9-1), 24 a release by message that takes the newest acquisition
// whatever its fencing_token names (red-team finding RT10-1). Mutant 3 (a retried unlock misjudged) is,
// since the guard, an unknown release outcome taken for one that never ran.
func On(n int) bool { return active[n] }
