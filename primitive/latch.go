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
	defer l.wrap("try set count", &err)
	if err := l.check(ctx); err != nil {
		return false, err
	}
	if count < 1 {
		return false, fmt.Errorf("%w: count %d is not positive", core.ErrInvalidArgument, count)
	}
	return l.redis().TrySetLatchCount(ctx, l.name, count)
}

// CountDown decrements the count; at zero the latch is deleted and awaiters
// everywhere return. It takes effect exactly once, even when re-attempted
// after a broken connection. Counting down a latch at zero does nothing.
func (l *CountDownLatch) CountDown(ctx context.Context) (err error) {
	defer l.wrap("count down", &err)
	if err := l.check(ctx); err != nil {
		return err
	}
	return l.redis().CountDown(ctx, l.name)
}

// Count is the current count (0 when the latch is not set).
func (l *CountDownLatch) Count(ctx context.Context) (_ int64, err error) {
	defer l.wrap("count", &err)
	if err := l.check(ctx); err != nil {
		return 0, err
	}
	return l.redis().Count(ctx, "latch count", l.name)
}

// Await returns nil once the count is zero, ctx's error when ctx ends first
// (errors.Is(err, context.DeadlineExceeded) for a deadline), or core.ErrClosed.
func (l *CountDownLatch) Await(ctx context.Context) (err error) {
	defer l.wrap("await", &err)
	if err := l.check(ctx); err != nil {
		return err
	}
	id := l.rt.NextID()
	res, err := core.Ask(ctx, l.rt.Done(), l.send, func(reply chan<- error) any {
		return &actors.Await{Name: l.name, ID: id, Reply: reply}
	}, nil, nil)
	if err != nil && !errors.Is(err, core.ErrClosed) {
		// Nothing to give back: the latch actor only forgets this awaiter.
		l.send(&actors.AwaitCancel{Name: l.name, ID: id})
	}
	if err != nil {
		return err
	}
	return res
}

// Delete deletes the latch, releasing its awaiters, and reports whether it
// existed.
func (l *CountDownLatch) Delete(ctx context.Context) (_ bool, err error) {
	defer l.wrap("delete", &err)
	if err := l.check(ctx); err != nil {
		return false, err
	}
	return l.redis().DeleteLatch(ctx, l.name)
}
