package actorlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// Do acquires the lock (waiting as Acquire does, with opts), runs fn with
// the hold's context (cancelled if the lock is lost) and unlocks, also when
// fn panics. It returns the acquisition's error, or fn's error joined with
// the unlock's: a lock lost while fn ran makes Do return an error wrapping
// ErrLost even if fn returned nil, since fn's work was not protected to the
// end. fn's context carries ctx's values. The unlock is not cut short by
// ctx ending, and is tried again while Redis cannot confirm it (the hold
// would otherwise stay renewed), until it succeeds or the hold ends.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...AcquireOption) (err error) {
	if fn == nil {
		return sentinel.Op("do", l.Name(), fmt.Errorf("%w: nil function", ErrInvalidArgument))
	}
	held, err := l.Acquire(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := release(held, nil); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(held.Context())
}

// release unlocks held. A release Redis could not confirm leaves the hold
// held and renewed, so it tries again (after 100 ms, doubling up to 2 s,
// telling failed of each failure) until it succeeds or the hold ends:
// during an outage, within about a lease, when renewals have failed for
// that long.
func release(held *Held, failed func(error)) error {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		err := held.Unlock(context.Background())
		if err == nil || errors.Is(err, ErrLost) || errors.Is(err, ErrUnlocked) || errors.Is(err, ErrClosed) {
			return err
		}
		if failed != nil {
			failed(err)
		}
		select {
		case <-time.After(backoff):
		case <-held.Done():
		}
	}
}
