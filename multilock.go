package actorlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// multi is a MultiLock's way of acquiring (see MultiLock).
type multi struct {
	members []groupMember
	err     error
}

// MultiLock groups locks, possibly of different runtimes on different
// Redis servers, into one that is held when all of them are (Redisson's
// RedissonMultiLock). Its members are acquired in one global order (by
// deployment, as WithServerName names it, then name), so MultiLocks
// sharing locks cannot deadlock each other. Invalid members (none, nil,
// bad, the same Redis key twice through any runtimes, or a Sentinel
// runtime without WithServerName beside another runtime) are reported by
// Acquire and TryAcquire as ErrInvalidArgument.
//
// Acquire takes every member, in the global order, waiting as each needs.
// With WaitTime, the whole acquisition gets that long: when a member cannot
// be had in what is left, everything taken is released and ErrNotAcquired
// returned; when a member fails otherwise (Redis), everything taken is
// released and the members are tried again after a short random back-off
// while time is left. Without WaitTime it waits until ctx ends. LeaseTime
// applies to every member. Nothing stays held when it fails. TryAcquire
// makes one attempt at every member: if any is held elsewhere, it releases
// what it took and returns ErrNotAcquired.
func MultiLock(locks ...*Lock) *Group {
	m, err := orderMembers(locks, "MultiLock")
	return &Group{by: &multi{members: m, err: err}}
}

func (m *multi) acquire(ctx context.Context, try bool, opts []AcquireOption) (held *GroupHeld, err error) {
	defer failed("acquire MultiLock", "", &err)
	ac, err := groupOptions(ctx, m.err, try, opts)
	if err != nil {
		return nil, err
	}
	ctx, obs := m.members[0].lock.rt.tel.startAcquire(ctx, kindMulti, "", !try, ac.waitSet && ac.wait > 0)
	defer func() { obs.end(err, "", 0) }()
	var deadline time.Time
	if ac.waitSet {
		deadline = time.Now().Add(ac.wait)
	}
	backoff := 10 * time.Millisecond
	for {
		helds, err := m.round(ctx, try, ac, deadline)
		if err == nil {
			return newGroupHeld(ctx, helds, len(helds), time.Time{}, "MultiLock"), nil
		}
		if try || errors.Is(err, ErrNotAcquired) || ctx.Err() != nil || !ac.waitSet || !time.Now().Before(deadline) {
			return nil, err
		}
		// A member failed for another reason (Redis): try again while
		// time is left.
		if !sleepCtx(ctx, min(time.Duration(rand.Int64N(int64(backoff))), time.Until(deadline))) {
			return nil, ctxError(ctx)
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// round takes every member in order, or releases what it took.
func (m *multi) round(ctx context.Context, try bool, ac acquireConfig, deadline time.Time) ([]*Held, error) {
	helds := make([]*Held, 0, len(m.members))
	for _, mem := range m.members {
		var opts []AcquireOption
		if ac.lease > 0 {
			opts = append(opts, LeaseTime(ac.lease))
		}
		var h *Held
		var err error
		switch {
		case try:
			h, err = mem.lock.TryAcquire(ctx, opts...)
		case !deadline.IsZero():
			h, err = mem.lock.Acquire(ctx, append(opts, WaitTime(max(time.Until(deadline), 0)))...)
		default:
			h, err = mem.lock.Acquire(ctx, opts...)
		}
		if err != nil {
			release := context.WithoutCancel(ctx)
			return nil, joinCauses(sentinel.Member(mem.lock.key.Name, err), unlockAll(release, helds))
		}
		helds = append(helds, h)
	}
	return helds, nil
}

// sleepCtx sleeps d unless ctx ends first; false if it did.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
