package actorlock

import (
	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/core"
	"github.com/actorlock/actorlock/primitive"
)

// handle is what a handle of package primitive on name starts from.
func (rt *Runtime) handle(name string) core.Handle {
	if !rt.valid() {
		return core.Handle{Name: name, Err: errNoRuntime}
	}
	name = rt.mapName(name)
	return core.Handle{RT: rt.core, Name: name, Err: actors.ValidateName(name)}
}

// Semaphore returns a handle on semaphore name (Redisson's RSemaphore). A
// bad name is reported by the handle's methods as ErrInvalidArgument.
func (rt *Runtime) Semaphore(name string) *primitive.Semaphore {
	return core.Handles.Semaphore(rt.handle(name)).(*primitive.Semaphore)
}

// PermitExpirableSemaphore returns a handle on permit-expirable semaphore
// name (Redisson's RPermitExpirableSemaphore): each permit has an id and a
// lease. A bad name is reported by the handle's methods as
// ErrInvalidArgument.
func (rt *Runtime) PermitExpirableSemaphore(name string) *primitive.PermitExpirableSemaphore {
	return core.Handles.PermitExpirableSemaphore(rt.handle(name)).(*primitive.PermitExpirableSemaphore)
}

// CountDownLatch returns a handle on latch name (Redisson's
// RCountDownLatch). A bad name is reported by the handle's methods as
// ErrInvalidArgument.
func (rt *Runtime) CountDownLatch(name string) *primitive.CountDownLatch {
	return core.Handles.CountDownLatch(rt.handle(name)).(*primitive.CountDownLatch)
}

// DelayedQueue opens a handle on the delayed queue of list name (Redisson's
// RDelayedQueue) and starts its mover in this runtime; Close the handle when
// done. A bad name is reported by the handle's methods as
// ErrInvalidArgument.
func (rt *Runtime) DelayedQueue(name string) *primitive.DelayedQueue {
	return core.Handles.DelayedQueue(rt.handle(name)).(*primitive.DelayedQueue)
}

// BlockingQueue returns a handle on the queue (list) name (Redisson's
// RBlockingQueue). A bad name is reported by the handle's methods as
// ErrInvalidArgument.
func (rt *Runtime) BlockingQueue(name string) *primitive.BlockingQueue {
	return core.Handles.BlockingQueue(rt.handle(name)).(*primitive.BlockingQueue)
}
