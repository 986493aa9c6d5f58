package actors

import "fmt"

// Read-write lock policy of lockActor (famRW). One actor serves both sides
// of a name. Readers share the lock; a writer excludes everyone else. The
// write owner may also read (a downgrade: releasing the write leaves its
// read holds); a reader may not take the write side (an upgrade would wait
// for its own read forever), so that is refused rather than deadlocked.

// rwBlocked reports whether a local hold keeps r from being granted: any
// write hold of another owner for a reader; any hold of another owner, or
// the owner's own read holds (an upgrade), for a writer.
func (a *lockActor) rwBlocked(r *request) bool {
	for owner, h := range a.holds {
		switch {
		case owner == r.owner:
			if r.write() && h.writes == 0 && h.count > 0 {
				return true
			}
		case r.write() || h.writes > 0:
			return true
		}
	}
	return false
}

// upgrade reports whether r asks for the write side of a read-write lock
// that its owner holds only for reading.
func (a *lockActor) upgrade(r *request) bool {
	if a.fam != famRW || !r.write() {
		return false
	}
	h := a.holds[r.owner]
	return h != nil && h.writes == 0 && h.count > 0
}

func upgradeError() error {
	return fmt.Errorf("%w: %w", ErrNotAcquired, ErrUpgrade)
}
