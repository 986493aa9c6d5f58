package core

import (
	"context"
	"fmt"
)

// Check reports what makes a call of a handle impossible before anything
// is sent: the first of errs (a bad name or option, reported by every call
// of the handle), a nil ctx, a closed runtime, or ctx already ended.
func (rt *Runtime) Check(ctx context.Context, errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	case rt.Closed():
		return ErrClosed
	case ctx.Err() != nil:
		return CtxError(ctx)
	}
	return nil
}

// Ask is the round trip of a Go caller with an actor of the runtime: it
// sends what msg builds around a reply channel (through send: the lock
// manager or the primitives actor) and waits for the one reply. It returns
// ErrClosed if the runtime closes first (done closes). If ctx ends first it returns ctx's
// error; when cancel is not nil it is sent, and the reply the actor still
// owes is taken and handed to giveBack (when not nil): a result that won
// the race with the cancel, which the caller, told it got nothing, must not
// keep. This is the one place where "a cancelled call gives back what it
// won" lives.
//
// A reply the actors sent before they stopped is there when done is closed
// (Close closes it after they stopped), and it is the outcome: an item or
// permits won must not be dropped because select picked done.
func Ask[R any](ctx context.Context, done <-chan struct{}, send func(any), msg func(reply chan<- R) any, cancel any, giveBack func(R)) (R, error) {
	reply := make(chan R, 1)
	send(msg(reply))
	var zero R
	select {
	case res := <-reply:
		return res, nil
	case <-done:
		if res, ok := answered(reply); ok {
			return res, nil
		}
		return zero, ErrClosed
	case <-ctx.Done():
	}
	if cancel != nil {
		send(cancel)
		var res R
		ok := true
		select {
		case res = <-reply:
		case <-done:
			res, ok = answered(reply)
		}
		if ok && giveBack != nil {
			giveBack(res)
		}
	}
	return zero, CtxError(ctx)
}

// answered is the reply already in reply, if any.
func answered[R any](reply <-chan R) (R, bool) {
	select {
	case res := <-reply:
		return res, true
	default:
		var zero R
		return zero, false
	}
}
