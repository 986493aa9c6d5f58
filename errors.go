package actorlock

import (
	"github.com/actorlock/actorlock/internal/core"
	"github.com/actorlock/actorlock/internal/sentinel"
)

// sentinelError is the type of the sentinel errors: a string, so that the
// errors the actors and internal/inspect return, declared with the same
// text, are the same values (errors_internal_test.go checks each).
type sentinelError = sentinel.Error

// Sentinel errors; match them with errors.Is. Errors from Redis (connection
// refused, timeouts) are returned wrapped, never disguised as one of these.
var (
	// ErrNotAcquired: the lock is held by another owner and the wait time
	// (or the single attempt of TryAcquire) is over.
	ErrNotAcquired error = sentinelError("actorlock: lock not acquired")
	// ErrNotOwner: the caller does not hold what it tried to release.
	ErrNotOwner error = sentinelError("actorlock: not the lock owner")
	// ErrLost: a held lock was lost: its lease ran out before it could be
	// renewed, or it was deleted or taken in Redis.
	ErrLost error = sentinelError("actorlock: lock lost")
	// ErrClosed: the Runtime is closing or closed.
	ErrClosed error = sentinelError("actorlock: runtime closed")
	// ErrInvalidArgument: empty or oversized names, negative durations, a
	// nil client or context, and other malformed input.
	ErrInvalidArgument error = sentinelError("actorlock: invalid argument")
	// ErrUnlocked: Unlock was already called successfully on this Held.
	ErrUnlocked error = sentinelError("actorlock: already unlocked")
	// ErrUpgrade: the owner holds a read-write lock only for reading and
	// asked for its write side, which would wait for itself forever. It
	// comes with ErrNotAcquired: at once from TryAcquire and from Acquire
	// without WaitTime, at the wait time otherwise.
	ErrUpgrade error = sentinelError("actorlock: a read holder cannot take the write lock (upgrade)")
	// ErrReplicaSync: with WithReplicaSync, too few replicas confirmed an
	// acquisition in time, every attempt; it comes with ErrNotAcquired and
	// nothing stays held.
	ErrReplicaSync error = sentinelError("actorlock: too few replicas confirmed the lock")
)

// failed puts *err, a failure of op on name ("" for a call on no name), in
// the one shape of the errors actorlock returns, for a deferred call:
// `actorlock: acquire "orders:1": lock not acquired` (see sentinel.OpError).
func failed(op, name string, err *error) { *err = sentinel.Op(op, name, *err) }

// joinCauses joins the causes of one failure: errors.Join, on one line.
func joinCauses(errs ...error) error {
	var j []error
	for _, err := range errs {
		if err != nil {
			j = append(j, err)
		}
	}
	switch len(j) {
	case 0:
		return nil
	case 1:
		return j[0]
	}
	return &joined{errs: j}
}

// joined is errors.Join's error told with "; " between its parts, each
// without actorlock's prefix, so that it reads as one cause.
type joined struct{ errs []error }

func (j *joined) Error() string   { return sentinel.List(j.errs...).Error() }
func (j *joined) Unwrap() []error { return j.errs }

// ctxError is ctx's error, with its cause (see core.CtxError).
var ctxError = core.CtxError
