package actorlock

// WithKeyPrefix maps every name given to the runtime's handles (Lock,
// FairLock, ReadWriteLock, the queues, semaphores and latches) to prefix +
// name before any Redis key or channel is derived from it, as Redisson's
// NameMapper does: Lock("orders:42") with prefix "app:" is the hash
// "app:orders:42", its channel "redisson_lock__channel:{app:orders:42}" and
// its fencing counter "redisson_lock_token:{app:orders:42}", so a Redisson
// client whose NameMapper adds the same prefix (or one that names
// "app:orders:42") guards the same lock. Hash tags apply to the mapped
// name: with a prefix holding "{" (such as "{app}:"), every name lands in
// one cluster slot. Handles' Name methods return the mapped name (the Redis
// key). The names of message-protocol requests (actorkit.PID) are mapped the
// same way, so an actor and a Go caller naming "orders:42" meet the same
// lock; a LockLost names the lock as its owner asked. Use it to share a Redis between
// applications or tenants, and narrow the ACL user to the prefix
// (docs/security.md, "ACL"). Default: no prefix.
func WithKeyPrefix(prefix string) Option {
	return func(c *config) {
		if prefix == "" {
			c.invalid("empty key prefix")
		}
		c.keyPrefix = prefix
	}
}

// mapName is the Redis name of a handle's name. An empty name stays empty,
// so that it is refused rather than becoming the bare prefix.
func (rt *Runtime) mapName(name string) string {
	if name == "" {
		return ""
	}
	return rt.keyPrefix + name
}
