package actorlock

import (
	"context"
	"errors"
	"fmt"
)

// Do acquires the lock (waiting as Acquire does, with opts), runs fn with
// the hold's context (cancelled if the lock is lost) and unlocks, also when
// fn panics. It returns the acquisition's error, or fn's error joined with
// the unlock's: a lock lost while fn ran makes Do return an error wrapping
// ErrLost even if fn returned nil, since fn's work was not protected to the
// end. fn's context carries ctx's values; the unlock is not cut short by
// ctx ending.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...AcquireOption) (err error) {
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	held, err := l.Acquire(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() {
		var unlockCtx context.Context = context.Background()
		if ctx != nil {
			unlockCtx = context.WithoutCancel(ctx)
		}
		if uerr := held.Unlock(unlockCtx); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(held.Context())
}

// Do runs fn under the lock name: rt.Lock(name).Do(ctx, fn, opts...).
func (rt *Runtime) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	return rt.Lock(name).Do(ctx, fn, opts...)
}
