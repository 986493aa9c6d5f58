package actorlock

import (
	"context"
	"fmt"
	"time"

	"github.com/actorlock/actorlock/actors"
	"github.com/actorlock/actorlock/scripts"
)

// Semaphore is a handle on a counting semaphore (Redisson's RSemaphore):
// the Redis STRING name holds the available permits. Permits have no owner:
// any caller may release them, and a process that dies holding permits does
// not give them back (use PermitExpirableSemaphore for that). Waiters are
// woken by the redisson_sc:{name} message that every release publishes, or
// by a recheck at least every second should a message be lost. It is safe
// for concurrent use.
type Semaphore struct{ object }

// Semaphore returns a handle on semaphore name. A bad name is reported by
// the handle's methods as ErrInvalidArgument.
func (rt *Runtime) Semaphore(name string) *Semaphore {
	return &Semaphore{object: rt.object(name)}
}

// TrySetPermits sets the number of permits if it was never set, and reports
// whether it did.
func (s *Semaphore) TrySetPermits(ctx context.Context, permits int64) (bool, error) {
	return trySetPermits(ctx, &s.object, permits)
}

// AddPermits adds permits (negative: removes them, possibly below zero) and
// wakes waiters.
func (s *Semaphore) AddPermits(ctx context.Context, permits int64) error {
	return addPermits(ctx, &s.object, permits)
}

// Acquire waits until n permits are available and takes them. It returns
// ctx's error when ctx ends first (permits obtained meanwhile are given
// back), ErrClosed when the runtime closes, or a wrapped Redis error.
// Waiters of one runtime are served first come, first served.
func (s *Semaphore) Acquire(ctx context.Context, n int64) error {
	if err := positive(n); err != nil {
		return err
	}
	_, err := acquirePermit(ctx, &s.object, false, n, 0, false)
	return err
}

// TryAcquire takes n permits if available now, and reports whether it did.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (bool, error) {
	if err := positive(n); err != nil {
		return false, err
	}
	res, err := acquirePermit(ctx, &s.object, false, n, 0, true)
	return res.Acquired, err
}

// Release gives back n permits and wakes waiters. It takes effect exactly
// once, even when re-attempted after a broken connection.
func (s *Semaphore) Release(ctx context.Context, n int64) error {
	if err := positive(n); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	env := s.env()
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return actors.ReleasePermits(ctx, env, s.name, n, scripts.Marked{RequestID: env.NewRequestID(), TTL: env.CallTimeout})
}

// Available is the number of permits available now (negative after
// AddPermits took more than there were).
func (s *Semaphore) Available(ctx context.Context) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	n, err := s.env().Redis.Get(ctx, s.name).Int64()
	if scripts.IsNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, s.fail("semaphore available", err)
	}
	return n, nil
}

// Drain takes every available permit and returns how many it took.
func (s *Semaphore) Drain(ctx context.Context) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	env := s.env()
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	mark := scripts.Marked{RequestID: env.NewRequestID(), TTL: env.CallTimeout}
	var n int64
	err := actors.RetryUnknown(ctx, func(ctx context.Context, _ int) (err error) {
		n, err = scripts.DrainPermits(ctx, env.Redis, s.name, mark)
		return err
	})
	if err != nil {
		return 0, s.fail("semaphore drain", err)
	}
	return n, nil
}

// PermitExpirableSemaphore is a handle on a semaphore whose permits each
// have an id and a lease (Redisson's RPermitExpirableSemaphore): a permit
// not released within its lease returns to the pool by itself, so a holder
// that dies gives its permits back. Keys: the STRING name (available
// permits) and the ZSET redisson__timeout__set:{name} (permit id -> expiry).
// Waiters wake on release messages, at the earliest permit expiry, and at
// least every second. It is safe for concurrent use.
type PermitExpirableSemaphore struct{ object }

// PermitExpirableSemaphore returns a handle on permit-expirable semaphore
// name. A bad name is reported by the handle's methods as
// ErrInvalidArgument.
func (rt *Runtime) PermitExpirableSemaphore(name string) *PermitExpirableSemaphore {
	return &PermitExpirableSemaphore{object: rt.object(name)}
}

// TrySetPermits sets the number of permits if it was never set, and reports
// whether it did.
func (s *PermitExpirableSemaphore) TrySetPermits(ctx context.Context, permits int64) (bool, error) {
	return trySetPermits(ctx, &s.object, permits)
}

// AddPermits adds permits (negative: removes them) and wakes waiters.
func (s *PermitExpirableSemaphore) AddPermits(ctx context.Context, permits int64) error {
	return addPermits(ctx, &s.object, permits)
}

// Acquire waits for a permit and returns its id, which Release needs. The
// permit returns to the pool by itself after lease (0: never). It returns
// ctx's error when ctx ends first (a permit obtained meanwhile is
// released), ErrClosed, or a wrapped Redis error.
func (s *PermitExpirableSemaphore) Acquire(ctx context.Context, lease time.Duration) (string, error) {
	if err := nonNegative("lease", lease); err != nil {
		return "", err
	}
	res, err := acquirePermit(ctx, &s.object, true, 1, lease, false)
	return res.PermitID, err
}

// TryAcquire takes a permit if one is available now; ok reports whether it
// did.
func (s *PermitExpirableSemaphore) TryAcquire(ctx context.Context, lease time.Duration) (id string, ok bool, err error) {
	if err := nonNegative("lease", lease); err != nil {
		return "", false, err
	}
	res, err := acquirePermit(ctx, &s.object, true, 1, lease, true)
	return res.PermitID, res.Acquired, err
}

// Release gives permit id back. It returns ErrPermitExpired if the permit's
// lease had run out (it was back in the pool, or is now), which means the
// work it guarded was not protected to the end.
func (s *PermitExpirableSemaphore) Release(ctx context.Context, id string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("%w: empty permit id", ErrInvalidArgument)
	}
	env := s.env()
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return actors.ReleasePermit(ctx, env, s.name, id, scripts.Marked{RequestID: env.NewRequestID(), TTL: env.CallTimeout})
}

// Available is the number of permits available now, expired permits
// included (they are returned to the pool first).
func (s *PermitExpirableSemaphore) Available(ctx context.Context) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	n, err := scripts.AvailableExpirablePermits(ctx, s.env().Redis, s.name)
	if err != nil {
		return 0, s.fail("semaphore available", err)
	}
	return n, nil
}

func positive(n int64) error {
	if n < 1 {
		return fmt.Errorf("%w: permits %d is not positive", ErrInvalidArgument, n)
	}
	return nil
}

func trySetPermits(ctx context.Context, o *object, permits int64) (bool, error) {
	if err := o.check(ctx); err != nil {
		return false, err
	}
	if permits < 0 {
		return false, fmt.Errorf("%w: negative permits %d", ErrInvalidArgument, permits)
	}
	env := o.env()
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	mark := scripts.Marked{RequestID: env.NewRequestID(), TTL: env.CallTimeout}
	var set bool
	err := actors.RetryUnknown(ctx, func(ctx context.Context, _ int) (err error) {
		set, err = scripts.TrySetPermits(ctx, env.Redis, o.name, permits, mark)
		return err
	})
	if err != nil {
		return false, o.fail("semaphore set permits", err)
	}
	return set, nil
}

func addPermits(ctx context.Context, o *object, permits int64) error {
	if err := o.check(ctx); err != nil {
		return err
	}
	env := o.env()
	ctx, cancel := o.bounded(ctx)
	defer cancel()
	mark := scripts.Marked{RequestID: env.NewRequestID(), TTL: env.CallTimeout}
	err := actors.RetryUnknown(ctx, func(ctx context.Context, _ int) error {
		_, err := scripts.AddPermits(ctx, env.Redis, o.name, permits, mark)
		return err
	})
	if err != nil {
		return o.fail("semaphore add permits", err)
	}
	return nil
}

// acquirePermit asks the semaphore's actor for permits and waits for its one
// answer; if ctx ends first it cancels, and gives back what won the race.
func acquirePermit(ctx context.Context, o *object, expirable bool, n int64, lease time.Duration, try bool) (actors.SemResult, error) {
	if err := o.check(ctx); err != nil {
		return actors.SemResult{}, err
	}
	id := o.rt.acquire.Add(1)
	reply := make(chan actors.SemResult, 1)
	o.send(&actors.SemAcquire{Name: o.name, Expirable: expirable, ID: id, N: n, Lease: lease, TryOnce: try, Reply: reply})
	select {
	case res := <-reply:
		return res, res.Err
	case <-o.rt.done:
		return actors.SemResult{}, ErrClosed
	case <-ctx.Done():
		o.send(&actors.SemCancel{Name: o.name, Expirable: expirable, ID: id})
		select {
		case res := <-reply:
			if res.Acquired {
				giveBackPermits(ctx, o, expirable, n, res.PermitID)
			}
		case <-o.rt.done:
		}
		return actors.SemResult{}, ctxError(ctx)
	}
}

func giveBackPermits(ctx context.Context, o *object, expirable bool, n int64, permitID string) {
	env := o.env()
	ctx, cancel := o.detached(ctx)
	defer cancel()
	mark := scripts.Marked{RequestID: env.NewRequestID(), TTL: env.CallTimeout}
	var err error
	if expirable {
		err = actors.ReleasePermit(ctx, env, o.name, permitID, mark)
	} else {
		err = actors.ReleasePermits(ctx, env, o.name, n, mark)
	}
	if err != nil {
		env.Log.Error("actorlock: could not give back permits a cancelled Acquire obtained", "semaphore", o.name, "error", err)
	}
}
