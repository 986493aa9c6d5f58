package actorlock

import (
	"context"
	"fmt"
	"time"

	"github.com/actorlock/actorlock/actors"
)

// ErrPermitExpired: Release or UpdateLeaseTime of a permit-expirable
// semaphore's permit that is not held: its lease had run out (it went back
// to the pool and another holder may have it now, so whatever it guarded was
// not protected to the end), or it was released already, or never taken.
var ErrPermitExpired = actors.ErrPermitExpired

// object is what the queue, semaphore and latch handles share: a name
// checked once, and the runtime.
type object struct {
	rt   *Runtime
	name string
	err  error // a bad name, reported by every method
}

func (rt *Runtime) object(name string) object {
	name = rt.mapName(name)
	return object{rt: rt, name: name, err: actors.ValidateName(name)}
}

// Name is the object's name, which is also its Redis key.
func (o *object) Name() string { return o.name }

// check reports what makes a call impossible before anything is sent.
func (o *object) check(ctx context.Context) error { return o.rt.check(ctx, o.err) }

// env is what direct Redis calls need: the client, the call timeout and
// request ids.
func (o *object) env() *actors.Env { return o.rt.actors.Env() }

// bounded bounds a direct Redis call, its re-attempts included, by the call
// timeout, which is also how long request markers live: a re-attempt must
// never outlive the marker that makes it safe.
func (o *object) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, o.env().CallTimeout)
}

// detached is for giving back what a caller who has gone obtained: it must
// complete even though the caller's context has ended.
func (o *object) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), o.env().CallTimeout)
}

func (o *object) send(msg any) { o.rt.sys.Root.Send(o.rt.actors.Services(), msg) }

func (o *object) fail(op string, err error) error {
	return fmt.Errorf("actorlock: %s %q: %w", op, o.name, err)
}

func nonNegative(what string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: negative %s %v", ErrInvalidArgument, what, d)
	}
	return nil
}
