package tests

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/scripts"
)

// A first unlock attempt (Fresh) skips reading its latch but still writes
// it, so that a retry of the same request id after an unknown outcome gets
// the first outcome instead of releasing a second hold: for the reentrant
// lock, the fair lock, and either side of the read-write lock (whose release
// of the last hold writes one too; the reentrant lock's does not, see
// TestUnlockRetryOfLastHoldWithoutLatch).
func TestUnlockLatchFreshAttemptAndRetry(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 20*time.Second)
	const owner = "rt:1"
	kinds := []struct {
		name  string
		field string // where Redis counts the owner's holds
		// lastLatch: the release of the last hold writes a latch too (the
		// reentrant lock's tells its retry by the hash instead)
		lastLatch bool
		acquire   func(scripts.AcquireArgs) (scripts.Grant, error)
		unlock    func(scripts.UnlockArgs) (scripts.Unlock, error)
	}{
		{"reentrant", owner, false,
			func(a scripts.AcquireArgs) (scripts.Grant, error) { return scripts.AcquireLock(ctx, rdb, a) },
			func(u scripts.UnlockArgs) (scripts.Unlock, error) { return scripts.UnlockLock(ctx, rdb, u) }},
		{"fair", owner, true,
			func(a scripts.AcquireArgs) (scripts.Grant, error) {
				return scripts.AcquireFair(ctx, rdb, scripts.FairAcquireArgs{AcquireArgs: a, Wait: 10 * time.Second})
			},
			func(u scripts.UnlockArgs) (scripts.Unlock, error) {
				r, err := scripts.UnlockFair(ctx, rdb, scripts.FairUnlockArgs{UnlockArgs: u, Wait: 10 * time.Second})
				return r.Unlock, err
			}},
		{"write", scripts.RWWriteField(owner), true,
			func(a scripts.AcquireArgs) (scripts.Grant, error) { return scripts.AcquireWrite(ctx, rdb, a) },
			func(u scripts.UnlockArgs) (scripts.Unlock, error) { return scripts.UnlockWrite(ctx, rdb, u) }},
		{"read", owner, true,
			func(a scripts.AcquireArgs) (scripts.Grant, error) { return scripts.AcquireRead(ctx, rdb, a) },
			func(u scripts.UnlockArgs) (scripts.Unlock, error) { return scripts.UnlockRead(ctx, rdb, u) }},
	}
	// Subtests one after another: each resets the server's command counts.
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			name := "latch:fresh:" + k.name
			var token int64
			for range 2 {
				g, err := k.acquire(scripts.AcquireArgs{Name: name, Owner: owner, Lease: 10 * time.Second, Seen: -1})
				require.NoError(t, err)
				require.True(t, g.Acquired)
				token = g.Token
			}
			unlock := scripts.UnlockArgs{Name: name, Owner: owner, RequestID: "req-1", Holds: 1, IfCount: -1, LatchTTL: 10 * time.Second, Fresh: true,
				Expect: 2, Counter: token}
			require.NoError(t, rdb.ConfigResetStat(ctx).Err())
			u, err := k.unlock(unlock)
			require.NoError(t, err)
			assert.Equal(t, scripts.StillHeld, u.State)
			stats, err := rdb.Info(ctx, "commandstats").Result()
			require.NoError(t, err)
			assert.Zero(t, commandCalls(stats, "get"), "a fresh unlock does not read its latch")
			assert.Equal(t, "0", rdb.Get(ctx, "redisson_unlock_latch:{"+name+"}:req-1").Val(), "but writes it")

			// The retry of req-1 (not fresh) finds the latch: the hold it
			// released is not released again.
			unlock.Fresh = false
			u, err = k.unlock(unlock)
			require.NoError(t, err)
			assert.Equal(t, scripts.StillHeld, u.State)
			assert.Equal(t, "1", rdb.HGet(ctx, name, k.field).Val(), "one hold left: the retry released nothing")

			// The last hold: released once; its retry answers Released again.
			unlock.RequestID, unlock.Fresh, unlock.Expect = "req-2", true, 1
			u, err = k.unlock(unlock)
			require.NoError(t, err)
			assert.Equal(t, scripts.Released, u.State)
			assert.Zero(t, rdb.Exists(ctx, name).Val())
			latch := rdb.Exists(ctx, "redisson_unlock_latch:{"+name+"}:req-2").Val()
			if k.lastLatch {
				assert.Equal(t, int64(1), latch, "the last release writes its latch")
			} else {
				assert.Zero(t, latch, "the last release writes no latch")
			}
			unlock.Fresh = false
			u, err = k.unlock(unlock)
			require.NoError(t, err)
			assert.Equal(t, scripts.Released, u.State, "the retry reports the first attempt's release")
			assert.Zero(t, u.Heard, "and announces nothing again")

			// A request id not seen before, not fresh, finds no latch and no
			// hold, and knows no count it released from.
			unlock.RequestID, unlock.Expect = "req-3", 0
			u, err = k.unlock(unlock)
			require.NoError(t, err)
			assert.Equal(t, scripts.NotOwner, u.State)
		})
	}
}

// The reentrant lock's release of the owner's last hold writes no latch; a
// retry judges by the hash and the fencing counter what an earlier attempt
// did, and never releases a hold granted since.
func TestUnlockRetryOfLastHoldWithoutLatch(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 10*time.Second)
	const name, owner = "latch:last", "rt:1"
	acquire := func() int64 {
		t.Helper()
		g, err := scripts.AcquireLock(ctx, rdb, scripts.AcquireArgs{Name: name, Owner: owner, Lease: 10 * time.Second, Seen: -1})
		require.NoError(t, err)
		require.True(t, g.Acquired)
		require.Equal(t, int64(1), g.HoldCount)
		return g.Token
	}
	unlock := func(requestID string, fresh bool, token int64) scripts.Unlock {
		t.Helper()
		u, err := scripts.UnlockLock(ctx, rdb, scripts.UnlockArgs{Name: name, Owner: owner, RequestID: requestID, Holds: 1, IfCount: -1,
			LatchTTL: 10 * time.Second, Fresh: fresh, Expect: 1, Counter: token})
		require.NoError(t, err)
		return u
	}

	// A retry whose first attempt never ran: the count and the counter are
	// as it expected, so it releases.
	first := acquire()
	assert.Equal(t, scripts.Released, unlock("req-a", false, first).State)
	assert.Zero(t, rdb.Exists(ctx, name).Val())

	// A first attempt released the lock and the owner re-entered since: the
	// retry finds a newer token and touches nothing.
	second := acquire()
	assert.Equal(t, scripts.Released, unlock("req-b", true, second).State)
	third := acquire()
	require.Greater(t, third, second)
	assert.Equal(t, scripts.StillHeld, unlock("req-b", false, second).State, "the owner holds a newer hold")
	assert.Equal(t, map[string]string{owner: "1"}, rdb.HGetAll(ctx, name).Val(), "which the retry left alone")

	// That hold released, a retry of it finds nothing left to release and
	// reports the release it may have been.
	assert.Equal(t, scripts.Released, unlock("req-c", true, third).State)
	u := unlock("req-c", false, third)
	assert.Equal(t, scripts.Released, u.State)
	assert.Zero(t, u.Heard, "announcing nothing again")

	// No latch was written for any of them.
	keys, err := rdb.Keys(ctx, "redisson_unlock_latch:*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys)
}

// The same for a hand-off: a fresh attempt writes the latch without reading
// it, and its retry hands the lock over once.
func TestHandoffLatchFreshAttemptAndRetry(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 10*time.Second)
	const name = "latch:handoff"
	g, err := scripts.AcquireLock(ctx, rdb, scripts.AcquireArgs{Name: name, Owner: "rt:a", Lease: 10 * time.Second, Seen: -1})
	require.NoError(t, err)
	require.True(t, g.Acquired)
	args := scripts.HandoffArgs{
		Name: name, From: "rt:a", RequestID: "req-h", LatchTTL: 10 * time.Second, Fresh: true,
		To: scripts.AcquireArgs{Owner: "rt:b", Lease: 10 * time.Second, Seen: -1},
	}

	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	h, err := scripts.HandoffLock(ctx, rdb, args)
	require.NoError(t, err)
	require.Equal(t, scripts.Released, h.Released)
	require.True(t, h.Next.Acquired)
	stats, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Zero(t, commandCalls(stats, "get"), "a fresh hand-off does not read its latch")
	assert.Equal(t, "1", rdb.Get(ctx, "redisson_unlock_latch:{"+name+"}:req-h").Val(), "but writes it")

	// The retry (as the actor sends it: not fresh, next's count seen 0)
	// finds the latch and does not count b's hold twice.
	args.Fresh, args.To.Seen = false, 0
	h, err = scripts.HandoffLock(ctx, rdb, args)
	require.NoError(t, err)
	assert.Equal(t, scripts.Released, h.Released)
	assert.True(t, h.Next.Acquired)
	assert.Equal(t, map[string]string{"rt:b": "1"}, rdb.HGetAll(ctx, name).Val())
}

// An Unlock whose outcome Redis could not confirm: the first attempt did
// release the lock (it ran once Redis resumed), and the runtime's own retry
// must find it done (no latch tells it: the hash and the fencing counter
// do), end the hold as unlocked, and release nothing else. A re-entry
// through the ended hold's context is refused. (TestRetriedUnlockIsNot
// MisjudgedAfterAReentry covers a re-entry while the retry is out.)
func TestFailedUnlockThatRanIsFoundDone(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	rt := newRuntime(t, rdb, actorlock.WithCallTimeout(time.Second))
	ctx := ctxFor(t, 30*time.Second)
	l := rt.Lock("reentered")
	// One unlock first, so that the server has the script cached: the
	// unlock held up below must run once Redis resumes, not be refused as
	// NOSCRIPT.
	warm, err := l.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, warm.Unlock(ctx))
	outer, err := l.Acquire(ctx)
	require.NoError(t, err)

	require.NoError(t, srv.Pause())
	err = outer.Unlock(ctx)
	require.NoError(t, srv.Resume())
	require.Error(t, err, "Redis did not answer the unlock")
	require.NotErrorIs(t, err, actorlock.ErrLost)
	require.Eventually(t, func() bool { return rdb.Exists(ctx, "reentered").Val() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the unlock ran once Redis resumed")

	select {
	case <-outer.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the runtime's retry of the release did not end the hold")
	}
	require.ErrorIs(t, outer.Err(), actorlock.ErrUnlocked)
	require.NoError(t, outer.Unlock(ctx), "the retried Unlock finds its release done")
	other, err := l.TryAcquire(ctx)
	require.NoError(t, err, "the lock is free")
	assert.Greater(t, other.Token(), outer.Token())
	_, err = l.Acquire(outer.Context())
	require.ErrorIs(t, err, context.Canceled, "no re-entry into an ended hold")
	require.NoError(t, other.Unlock(ctx))
	assert.Zero(t, rdb.Exists(ctx, "reentered").Val())
}
