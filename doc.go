// Package actorlock provides distributed locks and coordination primitives
// on Redis with Redisson's semantics and Redis data layout, served by
// protoactor-go actors: a Go service and a Java service using Redisson can
// guard the same resource under the same name.
//
// A service creates one Runtime per process and Redis deployment (New) and
// guards work with it:
//
//	held, err := rt.Lock("orders:42").Acquire(ctx, actorlock.WaitTime(5*time.Second))
//	if err != nil {
//		return err
//	}
//	defer held.Unlock(context.WithoutCancel(ctx))
//	return work(held.Context(), held.Token()) // cancelled if the lock is lost
//
// A *Lock handle is safe to share between goroutines like a sync.Mutex: two
// Acquire calls through one handle exclude each other, unless the second
// call's ctx descends from the first acquisition's Held.Context(), which
// re-enters (hold count +1, one Unlock per acquisition); WithOwner names an
// owner explicitly, shared by the handles that name it.
//
// It is NOT safe to assume that a lock is held until Unlock: a lease can run
// out while the process is paused, Redis can lose a lock in a failover (its
// replication is asynchronous), and the network can fail. Stop work when
// Done() closes, and pass Token() to the guarded resource so it can reject
// the writes of a holder that lost the lock (see docs/guarantees.md).
//
// The primitives, with their Redisson counterparts:
//
//   - Runtime.Lock: reentrant lock (RLock), with a lease renewed by the
//     watchdog while held (WithWatchdog) or a fixed LeaseTime, and a fencing
//     token per acquisition (Held.Token).
//   - Runtime.FairLock: waiters served in arrival order (RFairLock).
//   - Runtime.ReadWriteLock: many readers or one writer (RReadWriteLock).
//   - MultiLock: several locks, all or nothing, from any runtimes
//     (RedissonMultiLock).
//   - RedLock: a majority of independent masters (RedissonRedLock).
//   - WithReplicaSync: acquisitions confirmed by replicas (WAIT).
//   - Runtime.DelayedQueue into Runtime.BlockingQueue (RDelayedQueue,
//     RBlockingQueue).
//   - Runtime.Semaphore and Runtime.PermitExpirableSemaphore (RSemaphore,
//     RPermitExpirableSemaphore).
//   - Runtime.CountDownLatch (RCountDownLatch).
//
// The handles of the last three lines are in package primitive. Other
// packages keep what few callers need out of this one: observe (the types
// of events, holds, stats and lock inspection), actorkit (locking by
// message from protoactor actors, local or remote), remoting (serving a
// runtime over protoactor remote) and actorlocktest (a Redis and a runtime
// for your tests).
//
// One kind per name: a name is one kind of primitive, and a call of another
// kind on it returns ErrWrongKind, doing nothing. Where the Redis layout
// cannot tell two kinds apart, they share the name: a reentrant and a fair
// lock (one hash), and a semaphore, a permit-expirable semaphore and a
// count-down latch (one string holding a number).
//
// Errors are sentinels for errors.Is (ErrNotAcquired, ErrNotOwner, ErrLost,
// ErrClosed, ErrInvalidArgument, ErrWrongKind, ...), and a cancelled context
// keeps its cause. WithKeyPrefix maps every name for shared Redis
// deployments, as Redisson's NameMapper.
package actorlock
