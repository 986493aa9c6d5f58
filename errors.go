package actorlock

import (
	"context"
	"fmt"

	"github.com/actorlock/actorlock/actors"
)

// Sentinel errors; match them with errors.Is. Errors from Redis (connection
// refused, timeouts) are returned wrapped, never disguised as one of these.
var (
	// ErrNotAcquired: the lock is held by another owner and the wait time
	// (or the single attempt of TryAcquire) is over.
	ErrNotAcquired = actors.ErrNotAcquired
	// ErrNotOwner: the caller does not hold what it tried to release.
	ErrNotOwner = actors.ErrNotOwner
	// ErrLost: a held lock was lost: its lease ran out before it could be
	// renewed, or it was deleted or taken in Redis.
	ErrLost = actors.ErrLost
	// ErrClosed: the Runtime is closing or closed.
	ErrClosed = actors.ErrClosed
	// ErrInvalidArgument: empty or oversized names, negative durations, a
	// nil client or context, and other malformed input.
	ErrInvalidArgument = actors.ErrInvalidArgument
	// ErrUnlocked: Unlock was already called successfully on this Held.
	ErrUnlocked = actors.ErrUnlocked
	// ErrUpgrade: the owner holds a read-write lock only for reading and
	// asked for its write side, which would wait for itself forever. It
	// comes with ErrNotAcquired: at once from TryAcquire and from Acquire
	// without WaitTime, at the wait time otherwise.
	ErrUpgrade = actors.ErrUpgrade
	// ErrReplicaSync: with WithReplicaSync, too few replicas confirmed an
	// acquisition in time, every attempt; it comes with ErrNotAcquired and
	// nothing stays held.
	ErrReplicaSync = actors.ErrReplicaSync
)

// ctxError is ctx's error, carrying its cause too when one was given, so that
// both errors.Is(err, context.Canceled) and errors.Is(err, cause) hold.
func ctxError(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}
