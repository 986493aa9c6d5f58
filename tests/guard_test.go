package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/scripts"
)

// guardKinds are the lock kinds' acquire and unlock scripts, for the guard
// tests: field is where Redis counts the owner's holds.
func guardKinds(ctx context.Context, rdb *redis.Client, owner string) []struct {
	name    string
	field   string
	acquire func(scripts.AcquireArgs, scripts.Guard) (scripts.Grant, error)
	unlock  func(scripts.UnlockArgs, scripts.Guard) (scripts.Unlock, error)
} {
	return []struct {
		name    string
		field   string
		acquire func(scripts.AcquireArgs, scripts.Guard) (scripts.Grant, error)
		unlock  func(scripts.UnlockArgs, scripts.Guard) (scripts.Unlock, error)
	}{
		{"reentrant", owner,
			func(a scripts.AcquireArgs, g scripts.Guard) (scripts.Grant, error) {
				return scripts.AcquireLock(ctx, rdb, a, g)
			},
			func(u scripts.UnlockArgs, g scripts.Guard) (scripts.Unlock, error) {
				return scripts.UnlockLock(ctx, rdb, u, g)
			}},
		{"fair", owner,
			func(a scripts.AcquireArgs, g scripts.Guard) (scripts.Grant, error) {
				return scripts.AcquireFair(ctx, rdb, scripts.FairAcquireArgs{AcquireArgs: a, Wait: 10 * time.Second}, g)
			},
			func(u scripts.UnlockArgs, g scripts.Guard) (scripts.Unlock, error) {
				r, err := scripts.UnlockFair(ctx, rdb, scripts.FairUnlockArgs{UnlockArgs: u}, g)
				return r.Unlock, err
			}},
		{"write", scripts.RWWriteField(owner),
			func(a scripts.AcquireArgs, g scripts.Guard) (scripts.Grant, error) {
				return scripts.AcquireWrite(ctx, rdb, a, g)
			},
			func(u scripts.UnlockArgs, g scripts.Guard) (scripts.Unlock, error) {
				return scripts.UnlockWrite(ctx, rdb, u, g)
			}},
		{"read", owner,
			func(a scripts.AcquireArgs, g scripts.Guard) (scripts.Grant, error) {
				return scripts.AcquireRead(ctx, rdb, a, g)
			},
			func(u scripts.UnlockArgs, g scripts.Guard) (scripts.Unlock, error) {
				return scripts.UnlockRead(ctx, rdb, u, g)
			}},
	}
}

// Every attempt of one request runs under the same guard, the first as
// much as a retry, in whatever order they reach Redis: the request acts
// once, and every attempt answers what it did. For each lock kind: an
// acquisition sent twice counts one hold; a release sent twice releases
// one; the release of the last hold, sent again after the lock was taken
// by another owner, touches nothing.
func TestGuardActsOncePerRequest(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 20*time.Second)
	const owner = "rt:1"
	guard := func(id string) scripts.Guard { return scripts.Guard{ID: id, TTL: 10 * time.Second} }
	for _, k := range guardKinds(ctx, rdb, owner) {
		t.Run(k.name, func(t *testing.T) {
			name := "guard:" + k.name
			args := scripts.AcquireArgs{Name: name, Owner: owner, Lease: 10 * time.Second}
			first, err := k.acquire(args, guard("acq-1"))
			require.NoError(t, err)
			require.True(t, first.Acquired)
			again, err := k.acquire(args, guard("acq-1"))
			require.NoError(t, err)
			assert.Equal(t, first, again, "the second attempt answers what the first did")
			assert.Equal(t, "1", rdb.HGet(ctx, name, k.field).Val(), "counted once")
			assert.Equal(t, fmt.Sprintf("1,1,%d,1,%d%s", first.Token, first.Token, tail(k.name)), rdb.Get(ctx, "actorlock_request:{"+name+"}:acq-1").Val(),
				"the guard holds the reply")
			second, err := k.acquire(args, guard("acq-2"))
			require.NoError(t, err)
			require.Equal(t, int64(2), second.HoldCount, "another request re-enters")

			unlock := scripts.UnlockArgs{Name: name, Owner: owner, Holds: 1, IfCount: -1}
			for range 2 {
				u, err := k.unlock(unlock, guard("rel-1"))
				require.NoError(t, err)
				assert.Equal(t, scripts.StillHeld, u.State)
				assert.Equal(t, "1", rdb.HGet(ctx, name, k.field).Val(), "released once")
			}
			for range 2 {
				u, err := k.unlock(unlock, guard("rel-2"))
				require.NoError(t, err)
				assert.Equal(t, scripts.Released, u.State)
				assert.Zero(t, rdb.Exists(ctx, name).Val())
			}
			// Another owner takes the lock; rel-2 arriving once more
			// answers its release and leaves the new hold alone.
			other, err := k.acquire(scripts.AcquireArgs{Name: name, Owner: "rt:2", Lease: 10 * time.Second}, guard("acq-3"))
			require.NoError(t, err)
			require.True(t, other.Acquired)
			u, err := k.unlock(unlock, guard("rel-2"))
			require.NoError(t, err)
			assert.Equal(t, scripts.Released, u.State)
			assert.Equal(t, int64(1), rdb.Exists(ctx, name).Val(), "the other owner's hold is untouched")
		})
	}
}

// tail is what a read grant adds to its reply, after fresh and the mark (a
// fresh grant's own token): the owner's write holds.
func tail(kind string) string {
	if kind == "read" {
		return ",0"
	}
	return ""
}

// Settling a request tells what it did, or marks it so that it never acts:
// an attempt arriving after it was settled as not run does nothing. An
// attempt that arrives after its call's deadline in the server's clock
// does nothing either. And a spent guard is deleted by the next request.
func TestGuardSettlesDeadlinesAndSpends(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 20*time.Second)
	const name, owner = "guard:settle", "rt:1"
	args := scripts.AcquireArgs{Name: name, Owner: owner, Lease: 10 * time.Second}
	g := scripts.Guard{ID: "a", TTL: 10 * time.Second}

	settle := g
	settle.Settle = true
	_, err := scripts.AcquireLock(ctx, rdb, args, settle)
	require.ErrorIs(t, err, scripts.ErrNotRun, "settled before any attempt acted")
	_, err = scripts.AcquireLock(ctx, rdb, args, g)
	require.ErrorIs(t, err, scripts.ErrNotRun, "so a late attempt does nothing")
	assert.Zero(t, rdb.Exists(ctx, name).Val())
	ttl := rdb.PTTL(ctx, "actorlock_request:{"+name+"}:a").Val()
	assert.Greater(t, ttl, 9*time.Second, "the mark lives the guard's TTL")

	g.ID = "b"
	got, err := scripts.AcquireLock(ctx, rdb, args, g)
	require.NoError(t, err)
	settle = g
	settle.Settle = true
	settled, err := scripts.AcquireLock(ctx, rdb, args, settle)
	require.NoError(t, err)
	assert.Equal(t, got, settled, "settling a request that acted reports what it did")
	assert.Equal(t, "1", rdb.HGet(ctx, name, owner).Val())

	// The clock learnt from a reply: a server clock 10 s behind ours makes
	// every deadline already past in the server's eyes.
	clock := &scripts.Clock{}
	late := scripts.Guard{ID: "c", TTL: 10 * time.Second, Clock: clock}
	_, err = scripts.AcquireLock(ctx, rdb, args, late) // learns the clock
	require.NoError(t, err)
	require.True(t, clock.Known())
	require.Equal(t, "2", rdb.HGet(ctx, name, owner).Val())
	skewed := &scripts.Clock{Slack: -10 * time.Second}
	_, err = scripts.AcquireLock(ctx, rdb, args, scripts.Guard{ID: "learn", TTL: time.Second, Clock: skewed, Settle: true})
	require.ErrorIs(t, err, scripts.ErrNotRun)
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = scripts.AcquireLock(dctx, rdb, args, scripts.Guard{ID: "d", TTL: 10 * time.Second, Clock: skewed})
	require.ErrorIs(t, err, scripts.ErrNotRun, "an attempt past its deadline in the server's clock")
	assert.Equal(t, "2", rdb.HGet(ctx, name, owner).Val(), "did nothing")
	assert.Zero(t, rdb.Exists(ctx, "actorlock_request:{"+name+"}:d").Val(), "and left no guard: every attempt of it is as late")

	spend := scripts.Guard{ID: "e", Spent: "b", TTL: 10 * time.Second}
	_, err = scripts.UnlockLock(ctx, rdb, scripts.UnlockArgs{Name: name, Owner: owner, Holds: 1, IfCount: -1}, spend)
	require.NoError(t, err)
	assert.Zero(t, rdb.Exists(ctx, "actorlock_request:{"+name+"}:b").Val(), "the spent guard is deleted")
	assert.Equal(t, int64(1), rdb.Exists(ctx, "actorlock_request:{"+name+"}:e").Val())
}

// A hand-off sent twice releases and grants once.
func TestGuardedHandoffActsOnce(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 10*time.Second)
	const name = "guard:handoff"
	g, err := scripts.AcquireLock(ctx, rdb, scripts.AcquireArgs{Name: name, Owner: "rt:a", Lease: 10 * time.Second}, scripts.Guard{ID: "a", TTL: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, g.Acquired)
	args := scripts.HandoffArgs{Name: name, From: "rt:a", To: scripts.AcquireArgs{Owner: "rt:b", Lease: 10 * time.Second}}
	var first scripts.Handoff
	for i := range 2 {
		h, err := scripts.HandoffLock(ctx, rdb, args, scripts.Guard{ID: "h", TTL: 10 * time.Second})
		require.NoError(t, err)
		require.Equal(t, scripts.Released, h.Released)
		require.True(t, h.Next.Acquired)
		if i == 0 {
			first = h
		}
		assert.Equal(t, first, h)
		assert.Equal(t, map[string]string{"rt:b": "1"}, ownersOf(rdb.HGetAll(ctx, name).Val()))
	}
}

// An Unlock whose outcome Redis could not confirm: its attempt released the
// lock once Redis resumed, or arrived too late to act (its call's deadline
// had passed) and a later run released it. Either way the runtime settles
// what happened before it does anything else, ends the hold as unlocked,
// and releases nothing else. A re-entry through the ended hold's context is
// refused. (TestRetriedUnlockIsNotMisjudgedAfterAReentry covers a
// re-entry while the release is out.)
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
