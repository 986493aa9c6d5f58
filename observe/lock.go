package observe

import "time"

// LockInfo is who holds a lock, read from Redis (actorlock.Lock.Holders):
// any owner, of this runtime or another, Go or Java (Redisson).
type LockInfo struct {
	Name string
	// Mode is a read-write lock's mode: "read", "write", or "" when free.
	// Empty for the other locks.
	Mode    string
	Holders []LockHolder // sorted by owner; none when free
	// TTL is how long the lock's lease has left: 0 when free, -1 when the
	// key has no expiry (set by someone else).
	TTL time.Duration
}

// Locked reports whether any owner holds the lock.
func (i LockInfo) Locked() bool { return len(i.Holders) > 0 }

// LockHolder is one owner's holds. Owners are "<runtime id>:<n>" for
// actorlock's, "<client UUID>:<thread id>" for Redisson's, or an
// actorlock.WithOwner id.
type LockHolder struct {
	Owner string
	// Count is the owner's holds; for a read-write lock, its read holds.
	Count int64
	// WriteCount is a read-write lock owner's write holds.
	WriteCount int64
	// ReadTTLs is, for a read-write lock, how long each read hold has
	// left (hold n at index n-1; at most 100 listed): 0 when it has run
	// out, so it stops counting at the lock's next renewal.
	ReadTTLs []time.Duration
}

// Waiter is an owner in a fair lock's queue (actorlock.Lock.Waiters).
type Waiter struct {
	Owner string
	// Deadline is when it loses its place unless granted the lock first,
	// by the Redis server's clock (which every client's deadlines use).
	Deadline time.Time
	// Remaining is Deadline less the Redis server's time when read.
	Remaining time.Duration
}
