package actorlock

import (
	"context"

	"github.com/actorlock/actorlock/internal/core"
)

// check reports what makes a call of a handle impossible before anything
// is sent (see core.Runtime.Check).
func (rt *Runtime) check(ctx context.Context, errs ...error) error {
	if !rt.valid() {
		return errNoRuntime
	}
	return rt.core.Check(ctx, errs...)
}

// ask is the round trip of a Go caller with an actor of the runtime (see
// core.Ask): a result that won the race with ctx is given back.
func ask[R any](ctx context.Context, rt *Runtime, send func(any), msg func(reply chan<- R) any, cancel any, giveBack func(R)) (R, error) {
	return core.Ask(ctx, rt.done, send, msg, cancel, giveBack)
}
