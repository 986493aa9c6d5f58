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
	err  error // a bad name, reported by every method
}

// Name is the object's name, which is also its Redis key.
func (o *primitive) Name() string { return o.name }

// check reports what makes a call impossible before anything is sent.
func (o *primitive) check(ctx context.Context) error { return o.rt.Check(ctx, o.err) }

// redis is where the handle's direct Redis calls run.
func (o *primitive) redis() *actors.Handle { return o.rt.Actors }

// send sends a Go command to the primitive's actor.
func (o *primitive) send(msg any) { o.rt.Actors.SendPrimitive(msg) }

// wrap puts *err, a failure of op on the object, in the one shape of the
// errors actorlock returns (see sentinel.Op), for a deferred call.
func (o *primitive) wrap(op string, err *error) { *err = sentinel.Op(op, o.name, *err) }

func nonNegative(what string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: negative %s %v", core.ErrInvalidArgument, what, d)
	}
	return nil
}
