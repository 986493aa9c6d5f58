package tests

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/observe"
)

// redissonOwner is an owner id of the form Redisson writes: client UUID and
// thread id.
const redissonOwner = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0:57"

func TestHoldersOfOwnAndRedissonLocks(t *testing.T) {
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)

	l := rt.Lock("inspect:own")
	info, err := l.Holders(ctx)
	require.NoError(t, err)
	assert.False(t, info.Locked(), "a lock nobody took is free")
	assert.Zero(t, info.TTL)

	held, err := l.Acquire(ctx)
	require.NoError(t, err)
	again, err := l.Acquire(held.Context()) // re-entry: same owner, 2 holds
	require.NoError(t, err)
	info, err = l.Holders(ctx)
	require.NoError(t, err)
	require.Len(t, info.Holders, 1)
	assert.Equal(t, held.Owner(), info.Holders[0].Owner)
	assert.Equal(t, int64(2), info.Holders[0].Count)
	assert.Greater(t, info.TTL, time.Duration(0))
	assert.LessOrEqual(t, info.TTL, 30*time.Second, "the watchdog's default lease")
	require.NoError(t, again.Unlock(ctx))
	require.NoError(t, held.Unlock(ctx))
	info, err = l.Holders(ctx)
	require.NoError(t, err)
	assert.False(t, info.Locked())

	// A lock Redisson took: HINCRBY <uuid>:<thread> 1, PEXPIRE lease.
	require.NoError(t, rdb.HIncrBy(ctx, "inspect:java", redissonOwner, 1).Err())
	require.NoError(t, rdb.PExpire(ctx, "inspect:java", 20*time.Second).Err())
	info, err = rt.Lock("inspect:java").Holders(ctx)
	require.NoError(t, err)
	require.Len(t, info.Holders, 1)
	assert.Equal(t, redissonOwner, info.Holders[0].Owner)
	assert.Equal(t, int64(1), info.Holders[0].Count)
	assert.InDelta(t, float64(20*time.Second), float64(info.TTL), float64(5*time.Second))

	// A read-write lock read through a plain Lock handle is another kind.
	rw := rt.ReadWriteLock("inspect:rw")
	r, err := rw.ReadLocker().Acquire(ctx)
	require.NoError(t, err)
	defer r.Unlock(context.Background())
	_, err = rt.Lock("inspect:rw").Holders(ctx)
	assert.ErrorIs(t, err, actorlock.ErrWrongKind)
	_, err = rt.Lock("inspect:own").Waiters(ctx)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, "a plain lock has no queue")
}

func TestHoldersOfReadWriteLock(t *testing.T) {
	_, _, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	// A name with a hash tag of its own keys its read holds without
	// another one ("orders{7}:<owner>:rwlock_timeout:<n>").
	for _, name := range []string{"inspect:rwlock", "orders{7}"} {
		t.Run(name, func(t *testing.T) { testHoldersOfReadWriteLock(t, ctx, rt, name) })
	}
}

func testHoldersOfReadWriteLock(t *testing.T, ctx context.Context, rt *actorlock.Runtime, name string) {
	r1 := rt.ReadWriteLock(name, actorlock.WithOwner("reader-1")).ReadLocker()
	r2 := rt.ReadWriteLock(name, actorlock.WithOwner("reader-2")).ReadLocker()
	var helds []*actorlock.Held
	for _, l := range []*actorlock.Lock{r1, r1, r2} {
		h, err := l.Acquire(ctx, actorlock.LeaseTime(20*time.Second))
		require.NoError(t, err)
		helds = append(helds, h)
	}
	info, err := r2.Holders(ctx)
	require.NoError(t, err)
	assert.Equal(t, "read", info.Mode)
	require.Len(t, info.Holders, 2)
	assert.Equal(t, "reader-1", info.Holders[0].Owner)
	assert.Equal(t, int64(2), info.Holders[0].Count)
	assert.Equal(t, "reader-2", info.Holders[1].Owner)
	assert.Equal(t, int64(1), info.Holders[1].Count)
	for _, h := range info.Holders {
		require.Len(t, h.ReadTTLs, int(h.Count), "one TTL per read hold of %s", h.Owner)
		for _, d := range h.ReadTTLs {
			assert.Greater(t, d, 10*time.Second)
			assert.LessOrEqual(t, d, 20*time.Second)
		}
	}
	for _, h := range helds {
		require.NoError(t, h.Unlock(ctx))
	}

	w, err := rt.ReadWriteLock(name, actorlock.WithOwner("writer")).WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	info, err = r1.Holders(ctx)
	require.NoError(t, err)
	assert.Equal(t, "write", info.Mode)
	require.Len(t, info.Holders, 1)
	assert.Equal(t, observe.LockHolder{Owner: "writer", WriteCount: 1}, info.Holders[0])
	require.NoError(t, w.Unlock(ctx))
}

func TestWaitersOfFairLock(t *testing.T) {
	_, _, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "inspect:fair"
	holder, err := rt.FairLock(name, actorlock.WithOwner("first")).Acquire(ctx)
	require.NoError(t, err)

	// Two waiters, queued one after the other.
	got := make(chan *actorlock.Held, 2)
	for i, owner := range []string{"second", "third"} {
		go func() {
			h, err := rt.FairLock(name, actorlock.WithOwner(owner)).Acquire(ctx)
			if err == nil {
				got <- h
			}
		}()
		require.Eventually(t, func() bool {
			ws, err := rt.FairLock(name).Waiters(ctx)
			return err == nil && len(ws) == i+1
		}, 10*time.Second, 20*time.Millisecond, "waiter %s never queued", owner)
	}
	ws, err := rt.FairLock(name).Waiters(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 2)
	assert.Equal(t, "second", ws[0].Owner)
	assert.Equal(t, "third", ws[1].Owner)
	assert.Greater(t, ws[0].Remaining, time.Duration(0))
	assert.True(t, ws[1].Deadline.After(ws[0].Deadline), "each deadline is the one ahead's plus the wait")

	info, err := rt.FairLock(name).Holders(ctx)
	require.NoError(t, err)
	require.Len(t, info.Holders, 1)
	assert.Equal(t, "first", info.Holders[0].Owner)

	require.NoError(t, holder.Unlock(ctx))
	h := <-got
	assert.Equal(t, "second", h.Owner(), "the queue's head is served first")
	require.NoError(t, h.Unlock(ctx))
	h = <-got
	require.NoError(t, h.Unlock(ctx))
	ws, err = rt.FairLock(name).Waiters(ctx)
	require.NoError(t, err)
	assert.Empty(t, ws)
}

func TestPermitHolders(t *testing.T) {
	_, _, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	s := rt.PermitExpirableSemaphore("inspect:permits")
	_, err := s.TrySetPermits(ctx, 3)
	require.NoError(t, err)
	leased, err := s.Acquire(ctx, 10*time.Second)
	require.NoError(t, err)
	forever, err := s.Acquire(ctx, 0)
	require.NoError(t, err)

	ps, err := s.Holders(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 2)
	assert.Equal(t, leased, ps[0].ID, "soonest expiry first")
	assert.InDelta(t, float64(10*time.Second), float64(ps[0].Remaining), float64(3*time.Second))
	assert.Equal(t, forever, ps[1].ID)
	assert.True(t, ps[1].Expiry.IsZero(), "a permit without lease never expires")
	_, err = hex.DecodeString(ps[0].ID)
	assert.NoError(t, err)

	require.NoError(t, s.Release(ctx, leased, forever))
	ps, err = s.Holders(ctx)
	require.NoError(t, err)
	assert.Empty(t, ps)
}
