package tests

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// RT16-1: a read give-back whose expected count a release in flight moved
// (lockActor.undone lowers ifCount and holds) keeps the token of the read-
// hold key it first expected to find newest (key 2, the re-entered read's),
// but Redisson's read release deleted that key: the give-back now meets
// key 1, which holds the outer read's token, and rw_read_unlock.lua
// refuses it ({-2}). The abandoned read stays in Redis, blocking writers,
// until key 1 expires (the 1.5 s, here 2.2 s, Redis counts past the
// hold's local validity; with late renewals, up to a whole lease).
// TestSuspicion1AbandonedHoldWithAScriptInFlightIsGivenBack for a
// read-write lock's reads: the outer read reaches Redis 2.2 s late; a
// re-entered read (300 ms lease) is released at once, the release's reply
// coming after the outer read's validity ran out (so the hold is abandoned
// while the release is in flight).
func TestRedTeam16ReadGiveBackAfterAReleaseInFlightIsRefused(t *testing.T) {
	t.Parallel()
	const lease, late = 3 * time.Second, 2200 * time.Millisecond
	const name, owner = "rt16-read-undone", "owner-rt16-1"
	p, direct, rt := proxied(t, actorlock.WithWatchdog(3*time.Second))
	ctx := ctxFor(t, 30*time.Second)
	rd := rt.ReadWriteLock(name, actorlock.WithOwner(owner)).ReadLocker()
	held := p.on(1, holdCommand, late, func(c respCommand) bool { return isAcquireOn(c, name, owner) })
	t0 := time.Now()
	old, err := rd.Acquire(ctx, actorlock.LeaseTime(lease))
	require.NoError(t, err)
	await(t, held.hits, time.Second, "the read, held back")
	inner, err := rd.Acquire(ctx, actorlock.LeaseTime(300*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "a re-entered read")
	// The release runs at once; its reply comes after the outer read's
	// validity (t0 + lease) ran out.
	slow := p.on(1, delayReply, time.Until(t0.Add(lease))+300*time.Millisecond, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- inner.Unlock(ctx) }()
	await(t, slow.ran, time.Second, "the inner read's release, run by Redis")
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "the release deleted key 2, the newest")
	endsLost(t, old, 3*time.Second, "the old read did not end at its validity")
	require.NoError(t, await(t, unlocked, 2*time.Second, "the inner read's Unlock"))
	start := time.Now()
	defer func() {
		for direct.Exists(ctx, name).Val() != 0 && time.Since(start) < 10*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("the abandoned read left Redis %v after its release was answered", time.Since(start).Round(10*time.Millisecond))
	}()
	// Well before key 1 expires, late (2.2 s) after the hold's validity.
	freedWithin(t, ctx, direct, name, 1200*time.Millisecond, "the abandoned read is given back once Redis answers (the release was answered)")
}

// RT16-2: a re-entered read whose outcome could not be learnt is given
// back (giveBackUnknown: an owner id this runtime made, which nobody else
// uses), but the outer read, which the same outcome made lost
// (abandonHold), is given back only while Redis counts what it last saw
// (1): the unknown re-entry ran, Redis counts 2, and the give-back is
// refused. The whole hold, the read declared lost included, stayed in
// Redis for the outer read's lease (20 s here), not the unknown grant's
// (1 s): a read hash lives as long as its longest read-hold key, and its
// count does not drop when key 2 expires. The unknown re-entry's give-back
// is now tried as long as the owner's keys keep the lock. (A WithOwner
// id's is not given back, by count alone it could release a fresh
// re-entered hold of the id taken through another runtime, RT17-2: its
// hold expires within the outer read's lease.)
func TestRedTeam16LostReadUnderAnUnknownReentryStaysForItsLease(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(500*time.Millisecond))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt16-lost-under-unknown"
	rd := rt.ReadWriteLock(name).ReadLocker()
	old, err := rd.Acquire(ctx, actorlock.LeaseTime(20*time.Second))
	require.NoError(t, err)
	owner := readerOf(t, ctx, direct, name)
	mine := func(c respCommand) bool { return c.scriptOn(name, owner) }
	first := p.on(1, dropReply, 0, mine)
	var open atomic.Bool
	p.on(100000, refuse, 0, func(c respCommand) bool { return !open.Load() && mine(c) })
	_, err = rd.Acquire(old.Context(), actorlock.LeaseTime(time.Second))
	require.Error(t, err, "the re-entry's reply was lost")
	await(t, first.ran, time.Second, "the re-entry, run by Redis")
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "the re-entry ran")
	endsLost(t, old, 3*time.Second, "the outer read ends: whether it was still there cannot be told")
	time.Sleep(2500 * time.Millisecond) // runtime 1 gives up settling, and gives back
	open.Store(true)
	start := time.Now()
	defer func() {
		for direct.Exists(ctx, name).Val() != 0 && time.Since(start) < 10*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("the lost read left Redis %v after Redis answered again", time.Since(start).Round(10*time.Millisecond))
	}()
	// The unknown re-entry's lease (1 s) has passed; Redis answers again.
	// Well within the outer read's 20 s lease; loose enough for a loaded
	// machine under the race detector.
	w, err := other.ReadWriteLock(name).WriteLocker().Acquire(ctx, actorlock.WaitTime(5*time.Second))
	require.NoError(t, err, "a writer within 5 s of Redis answering, well past the unknown re-entry's 1 s lease (Redis holds %v, PTTL %v)",
		direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	require.NoError(t, w.Unlock(ctx))
}

// readerOf is the owner id of the one reader of read-write lock name.
func readerOf(t *testing.T, ctx context.Context, rdb *redis.Client, name string) string {
	t.Helper()
	var owners []string
	for _, f := range rdb.HKeys(ctx, name).Val() {
		if f != "mode" {
			owners = append(owners, f)
		}
	}
	require.Len(t, owners, 1, "one reader of %s", name)
	return owners[0]
}
