package scripts

import "strings"

// Redisson's key prefixes. Keeping them byte-for-byte identical is what lets a
// Java service using Redisson and a Go service using actorlock guard the same
// resource under the same name.
const (
	lockChannelPrefix = "redisson_lock__channel"
	unlockLatchPrefix = "redisson_unlock_latch"
	tokenPrefix       = "redisson_lock_token"
)

// prefixed puts a Redisson prefix before a name wrapped in a hash tag, so the
// auxiliary key lands in the same cluster slot as the bare lock key. A name
// that already contains '{' is used as is, as Redisson does.
func prefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// LockChannel is the pub/sub channel on which unlocks of the reentrant lock
// name are announced (message "0").
func LockChannel(name string) string { return prefixed(lockChannelPrefix, name) }

// TokenKey is the fencing counter of lock name.
func TokenKey(name string) string { return prefixed(tokenPrefix, name) }

// UnlockLatchKey remembers the outcome of one unlock request, so a retried
// request returns its first result instead of releasing twice.
func UnlockLatchKey(name, requestID string) string {
	return prefixed(unlockLatchPrefix, name) + ":" + requestID
}
