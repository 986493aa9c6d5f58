package observe

import "time"

// HeldLock describes one hold of a runtime, as actorlock.Runtime.Held lists it.
type HeldLock struct {
	Name  string        // the lock's name (its Redis key)
	Kind  string        // "lock", "fair", "read" or "write"
	Owner string        // actorlock.Held.Owner
	Token int64         // actorlock.Held.Token
	Since time.Time     // when the hold was granted (this process's clock)
	Lease time.Duration // actorlock.Held.Lease
}
