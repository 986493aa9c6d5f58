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
//   - The message protocol (package messages) for actors: package actorkit
//     has the runtime's PID, the keeper of a remote owner's locks and the
//     options of a runtime on your own actor system; package remoting
//     serves a runtime over protoactor remote.
//
// Errors are sentinels for errors.Is (ErrNotAcquired, ErrNotOwner, ErrLost,
// ErrClosed, ErrInvalidArgument, ...), and a cancelled context keeps its
// cause. WithKeyPrefix maps every name for shared Redis deployments, as
// Redisson's NameMapper. Package actorlocktest starts a Redis and a runtime
// for your tests.
package actorlock
