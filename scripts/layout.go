package scripts

import "strings"

// Redisson's key prefixes. Keeping them byte-for-byte identical is what lets a
// Java service using Redisson and a Go service using actorlock guard the same
// resource under the same name.
const (
	lockChannelPrefix = "redisson_lock__channel"
	tokenPrefix       = "redisson_lock_token"
	fairQueuePrefix   = "redisson_lock_queue"
	fairTimeoutPrefix = "redisson_lock_timeout"
	rwChannelPrefix   = "redisson_rwlock"
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

// HoldMarkField is the field of a reentrant or fair lock's HASH that marks
// the owner's run of holds (reentrant.lua's HOLD_MARK): the token of the
// grant that began them. Not Redisson's: its scripts pass over a field that
// is not their owner's, and no owner id may be it (nor "mode").
const HoldMarkField = "actorlock_hold"

// requestPrefix names the duplicate guards of requests (guard.lua) and the
// markers of the other primitives' requests: short-lived keys that make a
// request act once however many of its attempts reach Redis. Not
// Redisson's, which ignores keys it does not know.
const requestPrefix = "actorlock_request"

// requestKey is the guard of one request on object name (or, for a pop,
// its hold).
func requestKey(name, requestID string) string {
	return prefixed(requestPrefix, name) + ":" + requestID
}

// RequestKey is requestKey, for what the runtime logs.
func RequestKey(name, requestID string) string { return requestKey(name, requestID) }

// suffixed puts a suffix after a name wrapped in a hash tag (or after the
// name as is if it contains '{'), as Redisson does for per-owner keys.
func suffixed(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// FairQueueKey is the fair lock's FIFO of waiting owners (a LIST).
func FairQueueKey(name string) string { return prefixed(fairQueuePrefix, name) }

// FairTimeoutKey holds each waiting owner's deadline in ms (a ZSET), after
// which its queue entry is dropped: a waiter that died leaves the queue.
func FairTimeoutKey(name string) string { return prefixed(fairTimeoutPrefix, name) }

// FairChannel is where the fair lock tells owner that it is next: unlocks
// publish only to the head waiter's channel.
func FairChannel(name, owner string) string { return LockChannel(name) + ":" + owner }

// RWChannel is the read-write lock's channel: "0" when a read unlock frees
// it (wake one), "1" when a write unlock does (wake all).
func RWChannel(name string) string { return prefixed(rwChannelPrefix, name) }

// RWWriteField is the hash field counting owner's write holds.
func RWWriteField(owner string) string { return owner + ":write" }

// RWTimeoutPrefix prefixes the keys ("<prefix>:<n>") that bound each read
// hold of owner, so that a reader that died stops counting once its lease
// is over even while other readers keep the lock alive.
func RWTimeoutPrefix(name, owner string) string { return suffixed(name, owner+":rwlock_timeout") }

// rwKeyPrefix is what, followed by ":<owner>:rwlock_timeout:<n>", names the
// read-hold keys of any owner (the unlock script walks them all).
func rwKeyPrefix(name string) string {
	if strings.Contains(name, "{") {
		return name
	}
	return "{" + name + "}"
}

// RuntimeKeyPrefix starts every runtime record key (after the runtime's
// key prefix, if it has one).
const RuntimeKeyPrefix = "actorlock_runtime:"

// RuntimeKey is where runtime runtimeID records which process it is (host
// and pid, for operators reading a lock's holders): actorlock's own key,
// beside Redisson's layout, which it leaves as it is. keyPrefix is the
// runtime's WithKeyPrefix, so that the record stays in its namespace.
func RuntimeKey(keyPrefix, runtimeID string) string {
	return keyPrefix + RuntimeKeyPrefix + runtimeID
}
