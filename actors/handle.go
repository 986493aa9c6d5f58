package actors

import (
	"context"
	"time"

	"github.com/actorlock/actorlock/scripts"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// The direct Redis calls of package actorlock's queues, semaphores and
// latches: what needs no actor (nothing waits) runs on the caller's
// goroutine, through these methods, so that the Redis client, the call
// timeout and the retry rules stay here.

// SendPrimitive sends a Go command of the queues, semaphores and latches
// (DelayedOpen, Take, SemAcquire, Await, their cancels) to the actor that
// routes them.
func (h *Handle) SendPrimitive(msg any) { h.env.System.Root.Send(h.env.primitives, msg) }

// CallTimeout bounds one Redis call, its re-attempts included.
func (h *Handle) CallTimeout() time.Duration { return h.env.CallTimeout }

// guarded runs a script call under a duplicate guard of its own
// (scripts.Guard), which makes it safe to repeat: bounded by the call
// timeout, and re-attempted while its outcome is unknown, it acts once
// however many attempts reach Redis, in whatever order (the guard outlives
// every attempt that could still act). Its error says what it did to name;
// one that leaves the outcome unknown says so (the call may have acted, and
// no attempt of it will act later than the guard knows).
func guarded[T any](ctx context.Context, h *Handle, what, name string, call func(context.Context, scripts.Guard) (T, error)) (T, error) {
	env := h.env
	ctx, cancel := h.bounded(ctx)
	defer cancel()
	g := env.guard(env.NewRequestID())
	var res T
	err := retryGuarded(ctx, g, 19, func(ctx context.Context, g scripts.Guard) (err error) {
		res, err = call(ctx, g)
		return err
	})
	if err != nil {
		return res, fail(what, name, err)
	}
	return res, nil
}

// once runs a call that is never re-attempted (a read, or a take whose
// lost reply loses the item: a re-attempt would take a second one).
func once[T any](ctx context.Context, what, name string, call func(context.Context) (T, error)) (T, error) {
	res, err := call(ctx)
	if err != nil {
		return res, fail(what, name, err)
	}
	return res, nil
}

func fail(what, name string, err error) error { return sentinel.Op(what, name, err) }

// bounded bounds a call by the call timeout.
func (h *Handle) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return h.env.directCtx(ctx)
}

// detached bounds giving back what a caller who has gone obtained: it must
// complete even though the caller's context has ended.
func (h *Handle) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return h.env.directCtx(context.WithoutCancel(ctx))
}

// Push appends payload to list name, exactly once.
func (h *Handle) Push(ctx context.Context, name string, payload []byte) error {
	ctx, cancel := h.bounded(ctx)
	defer cancel()
	return h.env.push(ctx, name, payload, h.env.guard(h.env.NewRequestID()))
}

// Pop takes the head of list name, if any.
func (h *Handle) Pop(ctx context.Context, name string) ([]byte, bool, error) {
	ctx, cancel := h.bounded(ctx)
	defer cancel()
	r, err := once(ctx, "poll", name, func(ctx context.Context) (popped, error) {
		v, ok, err := h.env.pop(ctx, name, 0)
		return popped{v, ok}, err
	})
	return r.value, r.ok, err
}

type popped struct {
	value []byte
	ok    bool
}

// GiveBackItem puts back at the head of list name an item a cancelled
// Take obtained (see handBack).
func (h *Handle) GiveBackItem(ctx context.Context, name string, v []byte) {
	env := h.env
	h.handBack(ctx, func(ctx context.Context, g scripts.Guard) error {
		return scripts.GiveBack(ctx, env.batched, name, v, g)
	}, func(err error) {
		env.Log.Error("actorlock: could not give back an item a cancelled Take obtained", "queue", name, "error", err)
	})
}

// Len is the length of list name.
func (h *Handle) Len(ctx context.Context, name string) (int64, error) {
	return once(ctx, "queue length", name, func(ctx context.Context) (int64, error) {
		n, err := h.env.Redis.LLen(ctx, name).Result()
		return n, scripts.WrongType(ctx, h.env.Redis, name, err)
	})
}

// OfferDelayed stores payload in delayed queue name, due after delay,
// exactly once.
func (h *Handle) OfferDelayed(ctx context.Context, name string, payload []byte, delay time.Duration) error {
	env := h.env
	ctx, cancel := h.bounded(ctx)
	defer cancel()
	return env.offerDelayed(ctx, scripts.OfferArgs{
		Name: name, Member: scripts.DelayMember(randomID(), payload), Delay: delay,
	}, env.guard(env.NewRequestID()))
}

// DelayedLen is how many items of delayed queue name wait to be due.
func (h *Handle) DelayedLen(ctx context.Context, name string) (int64, error) {
	return once(ctx, "delayed queue length", name, func(ctx context.Context) (int64, error) {
		return h.env.Redis.LLen(ctx, scripts.DelayQueueKey(name)).Result()
	})
}

// ContainsDelayed reports whether an item equal to payload waits in delayed
// queue name.
func (h *Handle) ContainsDelayed(ctx context.Context, name string, payload []byte) (bool, error) {
	return once(ctx, "delayed queue contains", name, func(ctx context.Context) (bool, error) {
		return scripts.ContainsDelayed(ctx, h.env.Redis, name, payload)
	})
}

// RemoveDelayed removes the oldest waiting item equal to payload.
func (h *Handle) RemoveDelayed(ctx context.Context, name string, payload []byte) (bool, error) {
	return guarded(ctx, h, "delayed queue remove", name, func(ctx context.Context, g scripts.Guard) (bool, error) {
		return scripts.RemoveDelayed(ctx, h.env.Redis, name, payload, g)
	})
}

// PollDelayed takes the oldest waiting item, due or not.
func (h *Handle) PollDelayed(ctx context.Context, name string) ([]byte, bool, error) {
	r, err := once(ctx, "delayed queue poll", name, func(ctx context.Context) (popped, error) {
		v, ok, err := scripts.PollDelayed(ctx, h.env.Redis, name)
		return popped{v, ok}, err
	})
	return r.value, r.ok, err
}

// ClearDelayed removes every waiting item of delayed queue name.
func (h *Handle) ClearDelayed(ctx context.Context, name string) error {
	_, err := once(ctx, "delayed queue clear", name, func(ctx context.Context) (int64, error) {
		return h.env.Redis.Del(ctx, scripts.DelayTimeoutKey(name), scripts.DelayQueueKey(name)).Result()
	})
	return err
}

// TrySetPermits sets semaphore name's permits if they were never set.
func (h *Handle) TrySetPermits(ctx context.Context, name string, permits int64) (bool, error) {
	return guarded(ctx, h, "semaphore set permits", name, func(ctx context.Context, g scripts.Guard) (bool, error) {
		return scripts.TrySetPermits(ctx, h.env.Redis, name, permits, g)
	})
}

// AddPermits adds permits (negative: removes them) to semaphore name.
func (h *Handle) AddPermits(ctx context.Context, name string, permits int64) error {
	_, err := guarded(ctx, h, "semaphore add permits", name, func(ctx context.Context, g scripts.Guard) (int64, error) {
		return scripts.AddPermits(ctx, h.env.Redis, name, permits, g)
	})
	return err
}

// DrainPermits takes every available permit of semaphore name.
func (h *Handle) DrainPermits(ctx context.Context, name string) (int64, error) {
	return guarded(ctx, h, "semaphore drain", name, func(ctx context.Context, g scripts.Guard) (int64, error) {
		return scripts.DrainPermits(ctx, h.env.Redis, name, g)
	})
}

// ReleasePermits gives n permits back to semaphore name, exactly once.
func (h *Handle) ReleasePermits(ctx context.Context, name string, n int64) error {
	ctx, cancel := h.bounded(ctx)
	defer cancel()
	return h.env.releasePermits(ctx, name, n, h.env.guard(h.env.NewRequestID()))
}

// ReleasePermit gives permits ids of permit-expirable semaphore name back:
// ErrPermitExpired if any was not held, ErrInvalidArgument (releasing
// nothing) for a malformed id.
func (h *Handle) ReleasePermit(ctx context.Context, name string, ids []string) error {
	ctx, cancel := h.bounded(ctx)
	defer cancel()
	return h.env.releasePermit(ctx, name, ids, h.env.guard(h.env.NewRequestID()))
}

// GiveBackPermits releases permits a cancelled acquisition obtained (ids
// for a permit-expirable semaphore, else n; see handBack).
func (h *Handle) GiveBackPermits(ctx context.Context, name string, expirable bool, n int64, ids []string) {
	env := h.env
	h.handBack(ctx, permitsBack(env, name, expirable, n, ids), func(err error) { env.permitsBackFailed(name, err) })
}

// handBack runs call, which gives back what a Go caller that has gone
// obtained (an item, permits): within a call timeout if Redis answers,
// before the caller returns; else it goes on in the background for as long
// as the runtime runs, settled if its outcome is unknown and run again
// while it did not act, as the actors' give-backs are (carryThrough).
// failed gets the error of one that could not be carried through.
func (h *Handle) handBack(ctx context.Context, call func(context.Context, scripts.Guard) error, failed func(error)) {
	ctx, cancel := h.detached(ctx)
	defer cancel()
	env := h.env
	g, first := env.guard(env.NewRequestID()), time.Now()
	err := retryGuarded(ctx, g, 19, call)
	if err == nil {
		return
	}
	if !unsettled(err) && !mayWorkLater(err) {
		failed(err) // refused for good (NOPERM, a wrong kind)
		return
	}
	env.goCall(nil, func(context.Context) any {
		if unsettled(err) {
			err = env.settle(first, g, call)
		}
		if err != nil && !unsettled(err) && mayWorkLater(err) {
			err = env.carryThrough(call)
		}
		if err != nil {
			failed(err)
		}
		return nil
	})
}

// UpdatePermitLease gives held permit id of semaphore name a new lease, and
// reports whether it was held. ErrInvalidArgument for a malformed id.
func (h *Handle) UpdatePermitLease(ctx context.Context, name, id string, lease time.Duration) (bool, error) {
	if err := validatePermitIDs([]string{id}); err != nil {
		return false, err
	}
	ctx, cancel := h.bounded(ctx)
	defer cancel()
	return once(ctx, "semaphore update lease", name, func(ctx context.Context) (bool, error) {
		_, held, err := scripts.UpdatePermitLease(ctx, h.env.Redis, name, id, lease)
		return held, err
	})
}

// AvailableExpirablePermits is permit-expirable semaphore name's available
// permits, expired ones returned to the pool first.
func (h *Handle) AvailableExpirablePermits(ctx context.Context, name string) (int64, error) {
	return once(ctx, "semaphore available", name, func(ctx context.Context) (int64, error) {
		return scripts.AvailableExpirablePermits(ctx, h.env.Redis, name)
	})
}

// Count reads the integer at key name (a semaphore's permits, a latch's
// count): 0 when there is none.
func (h *Handle) Count(ctx context.Context, what, name string) (int64, error) {
	return once(ctx, what, name, func(ctx context.Context) (int64, error) {
		n, err := h.env.Redis.Get(ctx, name).Int64()
		if scripts.IsNil(err) {
			return 0, nil
		}
		return n, scripts.WrongType(ctx, h.env.Redis, name, err)
	})
}

// TrySetLatchCount sets latch name's count if it has none.
func (h *Handle) TrySetLatchCount(ctx context.Context, name string, count int64) (bool, error) {
	return guarded(ctx, h, "latch set count", name, func(ctx context.Context, g scripts.Guard) (bool, error) {
		return scripts.TrySetLatchCount(ctx, h.env.Redis, name, count, g)
	})
}

// CountDown decrements latch name's count, exactly once.
func (h *Handle) CountDown(ctx context.Context, name string) error {
	_, err := guarded(ctx, h, "latch count down", name, func(ctx context.Context, g scripts.Guard) (int64, error) {
		return scripts.CountDownLatch(ctx, h.env.Redis, name, g)
	})
	return err
}

// DeleteLatch deletes latch name and reports whether it existed.
func (h *Handle) DeleteLatch(ctx context.Context, name string) (bool, error) {
	return guarded(ctx, h, "latch delete", name, func(ctx context.Context, g scripts.Guard) (bool, error) {
		return scripts.DeleteLatch(ctx, h.env.Redis, name, g)
	})
}
