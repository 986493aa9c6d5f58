package primitive

import (
	"context"
	"fmt"
	"time"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/internal/core"
)

// Semaphore is a handle on a counting semaphore (Redisson's RSemaphore):
// the Redis STRING name holds the available permits. Permits have no owner:
// any caller may release them, and a process that dies holding permits does
// not give them back (use PermitExpirableSemaphore for that). Waiters are
// woken by the redisson_sc:{name} message that every release publishes, or
// by a recheck at least every second should a message be lost. It is safe
// for concurrent use.
type Semaphore struct{ primitive }

// TrySetPermits sets the number of permits if it was never set, and reports
// whether it did.
func (s *Semaphore) TrySetPermits(ctx context.Context, permits int64) (_ bool, err error) {
	o := s.p()
	defer o.wrap("try set permits", &err)
	return trySetPermits(ctx, o, permits)
}

// AddPermits adds permits (negative: removes them, possibly below zero) and
// wakes waiters.
func (s *Semaphore) AddPermits(ctx context.Context, permits int64) (err error) {
	o := s.p()
	defer o.wrap("add permits", &err)
	return addPermits(ctx, o, permits)
}

// Acquire waits until n permits are available and takes them. It returns
// ctx's error when ctx ends first (permits obtained meanwhile are given
// back), actorlock.ErrClosed when the runtime closes, or a wrapped Redis error.
// Waiters of one runtime are served first come, first served. Acquire(0)
// takes nothing and returns at once, as Redisson's acquire(0).
func (s *Semaphore) Acquire(ctx context.Context, n int64) (err error) {
	o := s.p()
	defer o.wrap("acquire", &err)
	if err := notNegative(n); err != nil {
		return err
	}
	if n == 0 {
		return o.check(ctx)
	}
	_, err = acquirePermit(ctx, o, false, n, 0, false)
	return err
}

// TryAcquire takes n permits if available now, and reports whether it did.
// TryAcquire(0) takes nothing and reports true, as Redisson's tryAcquire(0).
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (_ bool, err error) {
	o := s.p()
	defer o.wrap("acquire", &err)
	if err := notNegative(n); err != nil {
		return false, err
	}
	if n == 0 {
		err := o.check(ctx)
		return err == nil, err
	}
	res, err := acquirePermit(ctx, o, false, n, 0, true)
	return res.Acquired, err
}

// Release gives back n permits and wakes waiters. It takes effect exactly
// once, even when re-attempted after a broken connection. Release(0) does
// nothing (nor wakes anyone), as Redisson's release(0).
func (s *Semaphore) Release(ctx context.Context, n int64) (err error) {
	o := s.p()
	defer o.wrap("release", &err)
	if err := notNegative(n); err != nil {
		return err
	}
	if err := o.check(ctx); err != nil || n == 0 {
		return err
	}
	return o.redis().ReleasePermits(ctx, o.name, n)
}

// Available is the number of permits available now (negative after
// AddPermits took more than there were).
func (s *Semaphore) Available(ctx context.Context) (_ int64, err error) {
	o := s.p()
	defer o.wrap("available", &err)
	if err := o.check(ctx); err != nil {
		return 0, err
	}
	return o.redis().Count(ctx, "semaphore available", o.name)
}

// Drain takes every available permit and returns how many it took.
func (s *Semaphore) Drain(ctx context.Context) (_ int64, err error) {
	o := s.p()
	defer o.wrap("drain", &err)
	if err := o.check(ctx); err != nil {
		return 0, err
	}
	return o.redis().DrainPermits(ctx, o.name)
}

// PermitExpirableSemaphore is a handle on a semaphore whose permits each
// have an id and a lease (Redisson's RPermitExpirableSemaphore): a permit
// not released within its lease returns to the pool by itself, so a holder
// that dies gives its permits back. The layout is Redisson 4.x's, so Go and
// Java holders reclaim each other's expired permits: the STRING name
// (available permits) and the ZSET {name}:timeout (each permit id's 16 raw
// bytes -> expiry ms); ids are given out as 32 hex digits, as Redisson's.
// Permits an earlier actorlock kept in redisson__timeout__set:{name} are
// still reclaimed and released. Waiters wake on release messages, at the
// earliest permit expiry, and at least every second. It is safe for
// concurrent use.
type PermitExpirableSemaphore struct{ primitive }

// MaxPermitsPerCall is the most permits one AcquirePermits, TryAcquirePermits
// or Release handles: their ids travel in one script call. (The actors'
// MaxPermitIDs is the same bound: errors_internal_test.go checks it.)
const MaxPermitsPerCall = 1000

// TrySetPermits sets the number of permits if it was never set, and reports
// whether it did.
func (s *PermitExpirableSemaphore) TrySetPermits(ctx context.Context, permits int64) (_ bool, err error) {
	o := s.p()
	defer o.wrap("try set permits", &err)
	return trySetPermits(ctx, o, permits)
}

// AddPermits adds permits (negative: removes them) and wakes waiters.
func (s *PermitExpirableSemaphore) AddPermits(ctx context.Context, permits int64) (err error) {
	o := s.p()
	defer o.wrap("add permits", &err)
	return addPermits(ctx, o, permits)
}

// Acquire waits for a permit and returns its id, which Release needs. The
// permit returns to the pool by itself after lease (0: never). It returns
// ctx's error when ctx ends first (a permit obtained meanwhile is
// released), actorlock.ErrClosed, or a wrapped Redis error.
func (s *PermitExpirableSemaphore) Acquire(ctx context.Context, lease time.Duration) (_ string, err error) {
	o := s.p()
	defer o.wrap("acquire", &err)
	ids, err := s.AcquirePermits(ctx, 1, lease)
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// AcquirePermits waits until n permits are available and takes them at once
// (never some of them), each with its own id and the same lease (0: no
// expiry), as Redisson's acquire(permits, leaseTime). n must be 1 to
// MaxPermitsPerCall. Errors as Acquire.
func (s *PermitExpirableSemaphore) AcquirePermits(ctx context.Context, n int64, lease time.Duration) (_ []string, err error) {
	o := s.p()
	defer o.wrap("acquire permits", &err)
	if err := permitArgs(n, lease); err != nil {
		return nil, err
	}
	res, err := acquirePermit(ctx, o, true, n, lease, false)
	if err != nil {
		return nil, err
	}
	return res.PermitIDs, nil
}

// TryAcquire takes a permit if one is available now; ok reports whether it
// did.
func (s *PermitExpirableSemaphore) TryAcquire(ctx context.Context, lease time.Duration) (id string, ok bool, err error) {
	o := s.p()
	defer o.wrap("acquire", &err)
	ids, ok, err := s.TryAcquirePermits(ctx, 1, lease)
	if !ok {
		return "", false, err
	}
	return ids[0], true, nil
}

// TryAcquirePermits takes n permits if that many are available now; ok
// reports whether it did.
func (s *PermitExpirableSemaphore) TryAcquirePermits(ctx context.Context, n int64, lease time.Duration) (ids []string, ok bool, err error) {
	o := s.p()
	defer o.wrap("acquire permits", &err)
	if err := permitArgs(n, lease); err != nil {
		return nil, false, err
	}
	res, err := acquirePermit(ctx, o, true, n, lease, true)
	if err != nil || !res.Acquired {
		return nil, false, err
	}
	return res.PermitIDs, true, nil
}

// Release gives permits ids back; every one still held returns to the pool
// in one step. It returns actorlock.ErrPermitExpired if any had run out of lease (it
// was back in the pool, or is now: the work it guarded was not protected to
// the end) or was not held (released already, or never taken), and
// actorlock.ErrInvalidArgument, releasing nothing, for no id, more than
// MaxPermitsPerCall, an id given twice or one that is not 32 hex digits.
func (s *PermitExpirableSemaphore) Release(ctx context.Context, ids ...string) (err error) {
	o := s.p()
	defer o.wrap("release", &err)
	if err := o.check(ctx); err != nil {
		return err
	}
	return o.redis().ReleasePermit(ctx, o.name, ids)
}

// UpdateLeaseTime gives held permit id a new lease counted from now (0: no
// expiry), as Redisson's updateLeaseTime: to keep a permit through work
// longer than planned, call it well before the lease ends. It returns
// actorlock.ErrPermitExpired when the permit is not held (its lease ran out: it is
// back in the pool and cannot be revived; or it was released, or never
// taken) and actorlock.ErrInvalidArgument for a malformed id or a negative lease.
func (s *PermitExpirableSemaphore) UpdateLeaseTime(ctx context.Context, id string, lease time.Duration) (err error) {
	o := s.p()
	defer o.wrap("update lease time", &err)
	if err := o.check(ctx); err != nil {
		return err
	}
	if err := nonNegative("lease", lease); err != nil {
		return err
	}
	held, err := o.redis().UpdatePermitLease(ctx, o.name, id, lease)
	if err == nil && !held {
		err = fmt.Errorf("%w: permit %q is not held", core.ErrPermitExpired, id)
	}
	return err
}

// Available is the number of permits available now, expired permits
// included (they are returned to the pool first).
func (s *PermitExpirableSemaphore) Available(ctx context.Context) (_ int64, err error) {
	o := s.p()
	defer o.wrap("available", &err)
	if err := o.check(ctx); err != nil {
		return 0, err
	}
	return o.redis().AvailableExpirablePermits(ctx, o.name)
}

func permitArgs(n int64, lease time.Duration) error {
	if n < 1 || n > MaxPermitsPerCall {
		return fmt.Errorf("%w: permits %d, want 1 to %d", core.ErrInvalidArgument, n, MaxPermitsPerCall)
	}
	return nonNegative("lease", lease)
}

// notNegative checks a Semaphore's permit count: 0 is a no-op, as in
// Redisson, which also refuses a negative count.
func notNegative(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: permits %d is negative", core.ErrInvalidArgument, n)
	}
	return nil
}

func trySetPermits(ctx context.Context, o *primitive, permits int64) (bool, error) {
	if err := o.check(ctx); err != nil {
		return false, err
	}
	if permits < 0 {
		return false, fmt.Errorf("%w: negative permits %d", core.ErrInvalidArgument, permits)
	}
	return o.redis().TrySetPermits(ctx, o.name, permits)
}

func addPermits(ctx context.Context, o *primitive, permits int64) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	return o.redis().AddPermits(ctx, o.name, permits)
}

// acquirePermit asks the semaphore's actor for permits and waits for its one
// answer; if ctx ends first it cancels, and gives back what won the race.
func acquirePermit(ctx context.Context, o *primitive, expirable bool, n int64, lease time.Duration, try bool) (sr actors.SemResult, serr error) {
	if err := o.check(ctx); err != nil {
		return actors.SemResult{}, err
	}
	ctx, end := o.rt.Obs.StartPermits(ctx, expirable, o.name, !try)
	defer func() { end(sr.Acquired, serr) }()
	id := o.rt.NextID()
	res, err := core.Ask(ctx, o.rt.Done(), o.send, func(reply chan<- actors.SemResult) any {
		return &actors.SemAcquire{Name: o.name, Expirable: expirable, ID: id, N: n, Lease: lease, TryOnce: try, Reply: reply}
	}, &actors.SemCancel{Name: o.name, Expirable: expirable, ID: id}, func(won actors.SemResult) {
		if won.Acquired {
			o.redis().GiveBackPermits(ctx, o.name, expirable, n, won.PermitIDs)
		}
	})
	if err == nil {
		err = res.Err
	}
	return res, err
}
