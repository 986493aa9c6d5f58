package actorlock

import (
	"context"
	"fmt"

	"github.com/actorlock/actorlock/internal/core"
	"github.com/actorlock/actorlock/internal/inspect"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/observe"
)

// ErrWrongKind: the name holds another kind of object than the handle's,
// or something that is no actorlock/Redisson object. One kind per name:
// every primitive's call on a name another kind holds returns it, saying
// what the name holds and what the handle is ("it is a read-write lock, not
// a lock"), and neither waits nor writes. The kinds the Redis layout cannot
// tell apart share a name without it, as in Redisson: a reentrant and a
// fair lock (one hash: they exclude each other, the fair lock's queue order
// not binding the reentrant lock), and a semaphore, a permit-expirable
// semaphore and a count-down latch (one string holding a number). A
// blocking and a delayed queue of one name are one queue by design.
var ErrWrongKind error = sentinelError("actorlock: the name holds another kind of object")

// Holders reads who holds the lock now: owners and hold counts, the lease
// left and, for a read-write lock's locker, the mode and every reader (both
// lockers show the whole lock), in one MULTI; then each read hold's TTL. It returns ErrWrongKind if the name holds another kind of object
// (a read-write lock read through a plain Lock handle, say). What it
// shows may have changed by the time it returns.
func (l *Lock) Holders(ctx context.Context) (_ observe.LockInfo, err error) {
	defer failed("holders", l.Name(), &err)
	if err := l.check(ctx, nil); err != nil {
		return observe.LockInfo{}, err
	}
	o, err := l.read(ctx, l.inspectKind())
	if err != nil {
		return observe.LockInfo{}, err
	}
	info := observe.LockInfo{Name: o.Name, Mode: o.Mode, TTL: o.TTL}
	for _, h := range o.Holds {
		info.Holders = append(info.Holders, observe.LockHolder{Owner: h.Owner, Count: h.Count, WriteCount: h.Writes, ReadTTLs: h.ReadTTLs})
	}
	return info, nil
}

// Waiters lists a fair lock's queue, head first (at most 100 owners):
// who gets the lock next, and until when each keeps its place. It is
// ErrInvalidArgument on other locks, which queue nothing in Redis.
func (l *Lock) Waiters(ctx context.Context) (_ []observe.Waiter, err error) {
	defer failed("waiters", l.Name(), &err)
	if err := l.check(ctx, nil); err != nil {
		return nil, err
	}
	if l.key.Kind != messages.Kind_KIND_FAIR {
		return nil, fmt.Errorf("%w: not a fair lock; only the fair lock queues its waiters in Redis", ErrInvalidArgument)
	}
	o, err := l.read(ctx, inspect.FairLock)
	if err != nil {
		return nil, err
	}
	out := make([]observe.Waiter, len(o.Waiters))
	for i, w := range o.Waiters {
		out[i] = observe.Waiter(w)
	}
	return out, nil
}

func (l *Lock) read(ctx context.Context, kind inspect.Kind) (*inspect.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, l.rt.actors.CallTimeout())
	defer cancel()
	return core.WrongKind(inspect.Read(ctx, l.rt.rdb, l.key.Name, kind, 0))
}

func (l *Lock) inspectKind() inspect.Kind {
	switch l.key.Kind {
	case messages.Kind_KIND_FAIR:
		return inspect.FairLock
	case messages.Kind_KIND_READ, messages.Kind_KIND_WRITE:
		return inspect.ReadWriteLock
	}
	return inspect.Lock
}
