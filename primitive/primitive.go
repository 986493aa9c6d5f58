package primitive

import (
	"context"
	"fmt"
	"time"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/core"
	"github.com/actorlock/actorlock/internal/sentinel"
)

// primitive is what the queue, semaphore and latch handles share: a name
// checked once, and the runtime.
type primitive struct {
	rt   *core.Runtime
	name string
	err  error  // a bad name, reported by every method
	kind string // "a semaphore", ...: what ErrWrongKind says the handle wanted
}

// usable is o, or, when o's handle was not made by a Runtime, a primitive
// that refuses every call (what: the handle's type).
func (o *primitive) usable(what string) *primitive {
	if o.rt == nil && o.err == nil {
		return nilHandle(what)
	}
	return o
}

// nilHandle is the primitive of a nil handle of type what, or of one no
// Runtime made: every call returns ErrInvalidArgument.
func nilHandle(what string) *primitive {
	return &primitive{err: fmt.Errorf("%w: nil %s, or one not made by a Runtime", core.ErrInvalidArgument, what)}
}

// The primitive of each handle, usable whatever the handle (see usable).
func (s *Semaphore) p() *primitive {
	if s == nil {
		return nilHandle("Semaphore")
	}
	return s.primitive.usable("Semaphore")
}

func (s *PermitExpirableSemaphore) p() *primitive {
	if s == nil {
		return nilHandle("PermitExpirableSemaphore")
	}
	return s.primitive.usable("PermitExpirableSemaphore")
}

func (l *CountDownLatch) p() *primitive {
	if l == nil {
		return nilHandle("CountDownLatch")
	}
	return l.primitive.usable("CountDownLatch")
}

func (q *DelayedQueue) p() *primitive {
	if q == nil {
		return nilHandle("DelayedQueue")
	}
	return q.primitive.usable("DelayedQueue")
}

func (q *BlockingQueue) p() *primitive {
	if q == nil {
		return nilHandle("BlockingQueue")
	}
	return q.primitive.usable("BlockingQueue")
}

// Name is the semaphore's name, which is also its Redis key ("" for a nil
// handle).
func (s *Semaphore) Name() string { return s.p().name }

// Name is the semaphore's name, which is also its Redis key ("" for a nil
// handle).
func (s *PermitExpirableSemaphore) Name() string { return s.p().name }

// Name is the latch's name, which is also its Redis key ("" for a nil
// handle).
func (l *CountDownLatch) Name() string { return l.p().name }

// Name is the name of the list the queue delivers into, which is also its
// Redis key ("" for a nil handle).
func (q *DelayedQueue) Name() string { return q.p().name }

// Name is the queue's name, which is also its Redis key ("" for a nil
// handle).
func (q *BlockingQueue) Name() string { return q.p().name }

// check reports what makes a call impossible before anything is sent.
func (o *primitive) check(ctx context.Context) error {
	if o.err != nil {
		return o.err
	}
	return o.rt.Check(ctx)
}

// redis is where the handle's direct Redis calls run.
func (o *primitive) redis() *actors.Handle { return o.rt.Actors }

// send sends a Go command to the primitive's actor.
func (o *primitive) send(msg any) { o.rt.Actors.SendPrimitive(msg) }

// wrap puts *err, a failure of op on the object, in the one shape of the
// errors actorlock returns (see sentinel.Op), for a deferred call.
// An ErrWrongKind, which says what the name holds, also says what the
// handle is: "it is a lock or fair lock, not a semaphore".
func (o *primitive) wrap(op string, err *error) {
	*err = sentinel.Op(op, o.name, core.NotKind(*err, o.kind))
}

func nonNegative(what string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: negative %s %v", core.ErrInvalidArgument, what, d)
	}
	return nil
}
