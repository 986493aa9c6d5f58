package primitive

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/core"
	"github.com/actorlock/actorlock/internal/sentinel"
)

// DelayedQueue is a handle on the delayed queue in front of the list name
// (Redisson's RDelayedQueue on RBlockingQueue name): an item offered with a
// delay is moved into the list when it is due, where BlockingQueue(name)
// (or Java's RBlockingQueue) takes it. Items wait in Redis, not in this
// process: a producer that exits loses nothing.
//
// While a handle is open, this runtime runs the queue's mover, which moves
// due items within milliseconds of their due time (by the Redis server's
// clock, so producers' clock skew does not matter). It keeps running while
// items are pending, even after every handle is closed. Movers of several
// processes may run at once: each item is moved exactly once. Close a handle
// you no longer need. It is safe for concurrent use.
type DelayedQueue struct {
	primitive
	closeOnce sync.Once
	closed    bool
	mu        sync.Mutex
}

// openDelayedQueue opens a handle on the delayed queue of list o.name and
// starts its mover in the runtime.
func openDelayedQueue(o primitive) *DelayedQueue {
	q := &DelayedQueue{primitive: o}
	if q.err == nil && !q.rt.Closed() {
		q.send(&actors.DelayedOpen{Name: q.name})
	}
	return q
}

// Close ends this handle's use of the queue: once no handle of the runtime
// is open and no item is pending, the mover stops. Items still pending are
// delivered first. Later calls on the handle return actorlock.ErrClosed.
// A nil handle, or one no Runtime made, returns actorlock.ErrInvalidArgument.
func (q *DelayedQueue) Close() error {
	o := q.p()
	if o.rt == nil {
		return sentinel.Op("close", o.name, o.err)
	}
	q.closeOnce.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.mu.Unlock()
		if o.err == nil && !o.rt.Closed() {
			o.send(&actors.DelayedClose{Name: o.name})
		}
	})
	return nil
}

func (q *DelayedQueue) check(ctx context.Context) error {
	if o := q.p(); o.err != nil {
		return o.err
	}
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: the delayed queue handle is closed", core.ErrClosed)
	}
	return q.primitive.check(ctx)
}

// Offer stores payload, to be moved into the list after delay (0: as soon
// as the mover runs). Equal payloads are kept as separate items. An Offer
// takes effect exactly once, even when the connection breaks and the call is
// re-attempted; an error means Redis could not be reached (the item may then
// be stored or not).
func (q *DelayedQueue) Offer(ctx context.Context, payload []byte, delay time.Duration) (err error) {
	o := q.p()
	defer o.wrap("offer", &err)
	if err := q.check(ctx); err != nil {
		return err
	}
	ctx, end := o.rt.Obs.StartSpan(ctx, "actorlock.queue.offer", o.name)
	defer end(&err)
	if err := nonNegative("delay", delay); err != nil {
		return err
	}
	return o.redis().OfferDelayed(ctx, o.name, payload, delay)
}

// Len is how many items are waiting to be due.
func (q *DelayedQueue) Len(ctx context.Context) (_ int64, err error) {
	o := q.p()
	defer o.wrap("len", &err)
	if err := q.check(ctx); err != nil {
		return 0, err
	}
	return o.redis().DelayedLen(ctx, o.name)
}

// Contains reports whether an item equal to payload is waiting to be due.
func (q *DelayedQueue) Contains(ctx context.Context, payload []byte) (_ bool, err error) {
	o := q.p()
	defer o.wrap("contains", &err)
	if err := q.check(ctx); err != nil {
		return false, err
	}
	return o.redis().ContainsDelayed(ctx, o.name, payload)
}

// Remove removes the oldest waiting item equal to payload, so it is never
// delivered, and reports whether there was one.
func (q *DelayedQueue) Remove(ctx context.Context, payload []byte) (_ bool, err error) {
	o := q.p()
	defer o.wrap("remove", &err)
	if err := q.check(ctx); err != nil {
		return false, err
	}
	return o.redis().RemoveDelayed(ctx, o.name, payload)
}

// Poll takes the oldest waiting item (insertion order), due or not, so it
// is never delivered. ok is false when none waits. It is never re-attempted:
// on an error the item may have been taken and lost with the reply.
func (q *DelayedQueue) Poll(ctx context.Context) (payload []byte, ok bool, err error) {
	o := q.p()
	defer o.wrap("poll", &err)
	if err := q.check(ctx); err != nil {
		return nil, false, err
	}
	return o.redis().PollDelayed(ctx, o.name)
}

// Clear removes every waiting item. Items already moved into the list stay
// there.
func (q *DelayedQueue) Clear(ctx context.Context) (err error) {
	o := q.p()
	defer o.wrap("clear", &err)
	if err := q.check(ctx); err != nil {
		return err
	}
	return o.redis().ClearDelayed(ctx, o.name)
}

// BlockingQueue is a handle on the list name used as a FIFO queue
// (Redisson's RBlockingQueue): Offer appends, Poll and Take take the head.
// Several processes may take from one queue: each item goes to one taker.
// It is safe for concurrent use.
type BlockingQueue struct{ primitive }

// Offer appends payload. It takes effect exactly once, even when the call is
// re-attempted after a broken connection.
func (q *BlockingQueue) Offer(ctx context.Context, payload []byte) (err error) {
	o := q.p()
	defer o.wrap("offer", &err)
	if err := o.check(ctx); err != nil {
		return err
	}
	ctx, end := o.rt.Obs.StartSpan(ctx, "actorlock.queue.offer", o.name)
	defer end(&err)
	return o.redis().Push(ctx, o.name, payload)
}

// Poll takes the head without waiting; ok is false when the queue is empty.
// It is never re-attempted (a lost reply loses that item; a re-attempt
// would take a second one).
func (q *BlockingQueue) Poll(ctx context.Context) (payload []byte, ok bool, err error) {
	o := q.p()
	defer o.wrap("poll", &err)
	if err := o.check(ctx); err != nil {
		return nil, false, err
	}
	return o.redis().Pop(ctx, o.name)
}

// Take waits for the head and takes it. It returns ctx's error when ctx
// ends first (an item that its wait obtained meanwhile is put back at the
// head), actorlock.ErrClosed when the runtime closes, or a wrapped Redis error. The
// waiting Takes of a runtime share one blocking pop per queue, on a pooled
// connection held while it waits.
func (q *BlockingQueue) Take(ctx context.Context) (_ []byte, err error) {
	o := q.p()
	defer o.wrap("take", &err)
	if err := o.check(ctx); err != nil {
		return nil, err
	}
	ctx, end := o.rt.Obs.StartSpan(ctx, "actorlock.queue.take", o.name)
	defer end(&err)
	id := o.rt.NextID()
	res, err := core.Ask(ctx, o.rt.Done(), o.send, func(reply chan<- actors.TakeResult) any {
		return &actors.Take{Name: o.name, ID: id, Reply: reply}
	}, &actors.TakeCancel{Name: o.name, ID: id}, func(won actors.TakeResult) {
		if won.OK {
			o.redis().GiveBackItem(ctx, o.name, won.Value) // back to the head of the queue
		}
	})
	if err == nil {
		err = res.Err
	}
	return res.Value, err
}

// Len is the number of items in the queue.
func (q *BlockingQueue) Len(ctx context.Context) (_ int64, err error) {
	o := q.p()
	defer o.wrap("len", &err)
	if err := o.check(ctx); err != nil {
		return 0, err
	}
	return o.redis().Len(ctx, o.name)
}
