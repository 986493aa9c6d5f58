// Package primitive holds the handles of actorlock's coordination
// primitives other than locks, with Redisson's semantics and Redis layout:
// Semaphore (RSemaphore), PermitExpirableSemaphore
// (RPermitExpirableSemaphore), CountDownLatch (RCountDownLatch),
// DelayedQueue (RDelayedQueue) and BlockingQueue (RBlockingQueue). Get them
// from an actorlock.Runtime (rt.Semaphore(name), ...); a handle made
// otherwise, or nil, refuses every call with actorlock.ErrInvalidArgument.
// Their errors are actorlock's sentinels (actorlock.ErrClosed, ...), for
// errors.Is.
package primitive
