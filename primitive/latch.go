package primitive

import (
	"context"
	"errors"
	"fmt"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/core"
)

// CountDownLatch is a handle on a count-down latch (Redisson's
// RCountDownLatch): the Redis STRING name holds the count; awaiters return
// once it is zero (or was never set). Awaiters are woken by the "0" message
// on redisson_countdownlatch__channel__{name}, and re-read the count after
// every pub/sub reconnect and at least every second, so a lost message never
// leaves one hanging. It is safe for concurrent use.
type CountDownLatch struct{ primitive }

// TrySetCount sets the count if the latch has none (it is zero), and
// reports whether it did.
func (l *CountDownLatch) TrySetCount(ctx context.Context, count int64) (_ bool, err error) {
	o := l.p()
	defer o.wrap("try set count", &err)
	if err := o.check(ctx); err != nil {
		return false, err
	}
	if count < 1 {
		return false, fmt.Errorf("%w: count %d is not positive", core.ErrInvalidArgument, count)
	}
	return o.redis().TrySetLatchCount(ctx, o.name, count)
}

// CountDown decrements the count; at zero the latch is deleted and awaiters
// everywhere return. It takes effect exactly once, even when re-attempted
// after a broken connection. Counting down a latch at zero does nothing.
func (l *CountDownLatch) CountDown(ctx context.Context) (err error) {
	o := l.p()
	defer o.wrap("count down", &err)
	if err := o.check(ctx); err != nil {
		return err
	}
	return o.redis().CountDown(ctx, o.name)
}

// Count is the current count (0 when the latch is not set).
func (l *CountDownLatch) Count(ctx context.Context) (_ int64, err error) {
	o := l.p()
	defer o.wrap("count", &err)
	if err := o.check(ctx); err != nil {
		return 0, err
	}
	return o.redis().Count(ctx, "latch count", o.name)
}

// Await returns nil once the count is zero, ctx's error when ctx ends first
// (errors.Is(err, context.DeadlineExceeded) for a deadline), or actorlock.ErrClosed.
func (l *CountDownLatch) Await(ctx context.Context) (err error) {
	o := l.p()
	defer o.wrap("await", &err)
	if err := o.check(ctx); err != nil {
		return err
	}
	id := o.rt.NextID()
	res, err := core.Ask(ctx, o.rt.Done(), o.send, func(reply chan<- error) any {
		return &actors.Await{Name: o.name, ID: id, Reply: reply}
	}, nil, nil)
	if err != nil && !errors.Is(err, core.ErrClosed) {
		// Nothing to give back: the latch actor only forgets this awaiter.
		o.send(&actors.AwaitCancel{Name: o.name, ID: id})
	}
	if err != nil {
		return err
	}
	return res
}

// Delete deletes the latch, releasing its awaiters, and reports whether it
// existed.
func (l *CountDownLatch) Delete(ctx context.Context) (_ bool, err error) {
	o := l.p()
	defer o.wrap("delete", &err)
	if err := o.check(ctx); err != nil {
		return false, err
	}
	return o.redis().DeleteLatch(ctx, o.name)
}
