package actorlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/core"
	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"
)

// Lock is a handle on one lock. Like a sync.Mutex it is safe to share
// between goroutines, and acquisitions through it exclude each other: each
// is an owner of its own, unless its ctx descends from the Held.Context()
// of a hold of the same lock, which it then re-enters (hold count +1, one
// Unlock per acquisition). Reentrancy follows the context, the Go way of
// saying "the same logical thread". A handle made WithOwner acquires as that
// owner instead, always. A nil Lock, or one no Runtime made, refuses every
// call with ErrInvalidArgument (its Name and Owner are "").
type Lock struct {
	rt    *Runtime
	key   actors.LockKey
	owner string // WithOwner's id; "": each acquisition is an owner of its own
	err   error  // a bad name or option, reported by every method
}

// Name is the lock's name, which is also its Redis key ("" for a nil
// Lock).
func (l *Lock) Name() string {
	if l == nil {
		return ""
	}
	return l.key.Name
}

// Owner is the owner id the handle was given with WithOwner, or "" when
// each acquisition is an owner of its own (see Held.Owner).
func (l *Lock) Owner() string {
	if l == nil {
		return ""
	}
	return l.owner
}

// kindName is what ErrWrongKind says the handle is.
func (l *Lock) kindName() string {
	switch l.key.Kind {
	case messages.Kind_KIND_FAIR:
		return "a fair lock"
	case messages.Kind_KIND_READ, messages.Kind_KIND_WRITE:
		return "a read-write lock"
	}
	return "a lock"
}

// holdKey identifies, in a Held's context, the lock family it holds: the
// read and write sides of a read-write lock are one family, so a writer's
// context reads as the same owner (a downgrade) and a reader's asks for the
// write side as itself (refused: an upgrade).
type holdKey struct {
	rt   *Runtime
	kind messages.Kind
	name string
}

func (l *Lock) holdKey() holdKey {
	kind := l.key.Kind
	if kind == messages.Kind_KIND_WRITE {
		kind = messages.Kind_KIND_READ
	}
	return holdKey{rt: l.rt, kind: kind, name: l.key.Name}
}

// ownerIn is the owner an acquisition with ctx acts as, if it is an
// existing one: the handle's WithOwner id, or the owner of the hold of this
// lock whose Held.Context() ctx descends from; "" otherwise.
func (l *Lock) ownerIn(ctx context.Context) string {
	if l.owner != "" {
		return l.owner
	}
	owner, _ := ctx.Value(l.holdKey()).(string)
	return owner
}

// Acquire waits until the lock is acquired and returns the Held, or returns:
// ErrNotAcquired when WaitTime is over; ctx's error (errors.Is with
// context.Canceled or context.DeadlineExceeded) when ctx ends first; a
// wrapped Redis error when Redis cannot be reached; ErrClosed after Close.
// Waiting costs no Redis traffic: the waiter is woken by the unlock message,
// or when the holder's lease runs out should that message be missed.
// If ctx ends while an attempt is in flight, an acquisition that succeeds
// anyway is released again: no lock is left held by nobody.
func (l *Lock) Acquire(ctx context.Context, opts ...AcquireOption) (*Held, error) {
	return l.acquire(ctx, false, opts)
}

// TryAcquire makes a single attempt: it returns the Held, or ErrNotAcquired
// if another owner holds the lock. LeaseTime applies; WaitTime is refused
// with ErrInvalidArgument (to wait, use Acquire with WaitTime).
func (l *Lock) TryAcquire(ctx context.Context, opts ...AcquireOption) (*Held, error) {
	return l.acquire(ctx, true, opts)
}

func (l *Lock) acquire(ctx context.Context, try bool, opts []AcquireOption) (held *Held, err error) {
	defer failed("acquire", l.Name(), &err)
	ac, err := acquireOptions(opts)
	if err := l.check(ctx, err); err != nil {
		return nil, err
	}
	if try && ac.waitSet {
		return nil, fmt.Errorf("%w: TryAcquire makes one attempt; use Acquire with WaitTime to wait", ErrInvalidArgument)
	}
	owner := l.ownerIn(ctx)
	if owner == "" {
		owner = l.rt.newOwner()
	}
	rt := l.rt
	actx, obs := rt.tel.startAcquire(ctx, kindOf(l.key.Kind), l.key.Name, !try && !(ac.waitSet && ac.wait == 0), ac.waitSet && ac.wait > 0)
	defer func() { obs.end(err, owner, tokenOf(held)) }()
	// The Held's context keeps ctx's values but not its cancellation: it
	// ends when the hold does. It names the owner, for re-entries.
	heldCtx, end := context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), l.holdKey(), owner))
	track := rt.tel.track(end)
	cmd := l.acquireCommand(ac, try, owner, track.end)
	cmd.Span = trace.SpanContextFromContext(actx)
	res, err := ask(actx, rt, rt.send, func(reply chan<- actors.AcquireResult) any { cmd.Reply = reply; return cmd },
		&actors.Cancel{Key: l.key, ID: cmd.ID}, func(won actors.AcquireResult) { l.giveBack(won, cmd) })
	if err == nil {
		err = core.NotKind(res.Err, l.kindName())
	}
	if err != nil {
		end(err)
		return nil, err
	}
	h := &Held{
		lock: l, owner: owner, id: cmd.ID, token: res.Token, lease: res.HolderTTL,
		ctx: heldCtx, track: track, valid: res.Valid, unlockID: rt.actors.NewRequestID(),
	}
	track.started(h, obs.kind, time.Since(obs.start))
	return h, nil
}

// acquireCommand is the request of one acquisition by owner.
func (l *Lock) acquireCommand(ac acquireConfig, try bool, owner string, end context.CancelCauseFunc) *actors.Acquire {
	cmd := &actors.Acquire{
		Key: l.key, Owner: owner, ID: l.rt.acquire.Add(1), Lease: ac.lease,
		TryOnce: try || (ac.waitSet && ac.wait == 0), End: end,
	}
	if ac.waitSet && ac.wait > 0 {
		cmd.Deadline = time.Now().Add(ac.wait)
	}
	return cmd
}

// giveBack releases a grant that won the race with its cancel, before
// Acquire returns, so that the caller, told it holds nothing, finds the lock
// free. It waits for the release a call timeout at most: a release queued
// behind other scripts of the name, or met by a slow Redis, must not hold
// the caller that long past its ctx; the runtime carries it through anyway
// (retrying until Redis answers), and this runtime's next acquisition of
// the name comes after it.
func (l *Lock) giveBack(won actors.AcquireResult, cmd *actors.Acquire) {
	if won.Err != nil {
		return
	}
	rt := l.rt
	ctx, cancel := context.WithTimeout(context.Background(), rt.actors.CallTimeout())
	defer cancel()
	_, _ = ask(ctx, rt, rt.send, func(reply chan<- actors.ReleaseResult) any {
		return &actors.Release{Key: l.key, Owner: cmd.Owner, ID: cmd.ID, RequestID: rt.actors.NewRequestID(), Reply: reply}
	}, nil, nil)
}

// check reports what makes a call impossible before anything is sent: a
// nil Lock or one no Runtime made too.
func (l *Lock) check(ctx context.Context, optErr error) error {
	switch {
	case l == nil:
		return errNilHandle("Lock")
	case l.err != nil:
		return l.err
	case l.rt == nil:
		return errNilHandle("Lock")
	}
	return l.rt.check(ctx, optErr)
}

// IsLocked reports whether any owner holds the lock (a read-write lock's
// locker: holds it in its own mode; the read side also when the writer
// holds a read, as Redisson's readLock().isLocked()).
func (l *Lock) IsLocked(ctx context.Context) (_ bool, err error) {
	defer failed("is locked", l.Name(), &err)
	if err := l.check(ctx, nil); err != nil {
		return false, err
	}
	var locked bool
	switch l.key.Kind {
	case messages.Kind_KIND_READ:
		locked, err = readLocked(ctx, l.rt.rdb, l.key.Name)
	case messages.Kind_KIND_WRITE:
		var mode string
		mode, err = l.rt.rdb.HGet(ctx, l.key.Name, "mode").Result()
		locked = (mode == "read" && l.key.Kind == messages.Kind_KIND_READ) || (mode == "write" && l.key.Kind == messages.Kind_KIND_WRITE)
		if errors.Is(err, redis.Nil) {
			err = nil
		}
	default:
		var n int64
		n, err = l.rt.rdb.Exists(ctx, l.key.Name).Result()
		locked = n == 1
	}
	if err != nil {
		return false, err
	}
	return locked, nil
}

// HoldCount is how many times the owner an acquisition with ctx would
// re-enter (the handle's WithOwner id, or the hold whose Held.Context() ctx
// descends from) holds the lock in Redis; 0 when there is none or it holds
// nothing. For a read-write lock's locker: in its own mode.
func (l *Lock) HoldCount(ctx context.Context) (_ int, err error) {
	defer failed("hold count", l.Name(), &err)
	if err := l.check(ctx, nil); err != nil {
		return 0, err
	}
	field := l.ownerIn(ctx)
	if field == "" {
		return 0, nil
	}
	if l.key.Kind == messages.Kind_KIND_WRITE {
		field = scripts.RWWriteField(field)
	}
	n, err := l.rt.rdb.HGet(ctx, l.key.Name, field).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// RemainTTL is how long the current holder's lease has left: 0 when the lock
// is free, negative when the key has no expiry (set by someone else).
func (l *Lock) RemainTTL(ctx context.Context) (_ time.Duration, err error) {
	defer failed("remain TTL", l.Name(), &err)
	if err := l.check(ctx, nil); err != nil {
		return 0, err
	}
	d, err := l.rt.rdb.PTTL(ctx, l.key.Name).Result()
	if err != nil {
		return 0, err
	}
	switch {
	case d == -2: // go-redis passes PTTL's "no such key" through as -2ns
		return 0, nil
	case d < 0:
		return -1, nil
	}
	return d, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters. It
// returns whether the lock was held (a read-write lock's locker: held in its
// own mode; the other mode is left alone). Holds of this runtime on it end
// with ErrLost.
func (l *Lock) ForceUnlock(ctx context.Context) (_ bool, err error) {
	defer failed("force unlock", l.Name(), &err)
	if err := l.check(ctx, nil); err != nil {
		return false, err
	}
	res, err := ask(ctx, l.rt, l.rt.send, func(reply chan<- actors.ForceUnlockResult) any {
		return &actors.ForceUnlock{Key: l.key, Reply: reply}
	}, nil, nil)
	if err != nil {
		return false, err
	}
	return res.WasLocked, res.Err
}
