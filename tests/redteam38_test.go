package tests

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// The thirty-eighth red-team pass, over the holds' mark (scripts.HoldMarkField,
// b63a8fe): give-backs of reentrant and fair locks check the mark of the
// run of holds they undo instead of the fencing counter.

// isExtendOn reports whether c is Held.Extend's script (unguarded: two keys,
// the lock and its counter; lease and owner) for owner on name.
func isExtendOn(c respCommand, name, owner string) bool {
	keys, argv, ok := c.script()
	return ok && !guarded(keys) && len(keys) == 2 && keys[0] == name && len(argv) == 2 && argv[1] == owner
}

// RT38-1 (safety: two holders; "a give-back releases only this runtime's
// grants" broken for a WithOwner id held through another runtime too).
// Fixed: a late Extend gives nothing back (actors/extend.go, extended):
// whatever ended its grant (its Unlock, its hold's give-back, Close's
// drain) releases the grant's holds in Redis, before the Extend's script or
// after it.
//
// A late Extend's give-back (extended → giveBack(owner, false, ours, count,
// mark)) is built on the owner's count and the holds' mark when the Extend
// was sent. It runs when the hold is gone here and no give-back of it is
// still out: also after the hold's own give-back has already run and given
// the same grant back. The counter check refused it then whenever anyone
// had re-entered since (the counter had moved). The mark does not move on a
// re-entry: once another runtime holding the same owner id re-enters, the
// count is back at what the Extend saw, and the Extend's give-back releases
// a hold of the other runtime's. Its inner Unlock then frees the lock under
// its outer hold.
//
// Runtime 2 holds X (watchdog). Runtime 1 holds X with a 1 s LeaseTime
// (count 2, runtime 2's mark) and extends it; the extension runs in Redis,
// its reply comes back late. Runtime 1's hold ends at its validity and its
// give-back (1 hold while count 2) runs: count 1, runtime 2's. Runtime 2
// re-enters: count 2. The Extend's reply comes: its give-back (1 hold while
// count 2, the same mark) runs too: count 1 for runtime 2's two holds.
func TestRedTeam38LateExtendGivesBackAgainAfterTheHoldsOwnGiveBack(t *testing.T) {
	t.Parallel()
	p, p2, direct, rt1, rt2, other := sharedOwnerRuntimes(t, actorlock.WithCallTimeout(2*time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt38-late-extend-again", "owner-rt38-1"
	l2 := rt2.Lock(name, actorlock.WithOwner(owner))
	outer2, err := l2.Acquire(ctx)
	require.NoError(t, err)
	h1, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "one owner id, a hold in each runtime")
	replyAt := h1.ValidUntil().Add(800 * time.Millisecond)
	slow := p.on(1, delayReply, time.Until(replyAt), func(c respCommand) bool { return isExtendOn(c, name, owner) })
	extended := make(chan error, 1)
	go func() { extended <- h1.Extend(ctx, 5*time.Second) }()
	await(t, slow.ran, time.Second, "runtime 1's Extend, run by Redis")
	endsLost(t, h1, 2*time.Second, "runtime 1's hold ends at its LeaseTime")
	require.Eventually(t, func() bool { return direct.HGet(ctx, name, owner).Val() == "1" }, time.Second, 5*time.Millisecond,
		"runtime 1's own give-back releases its hold: runtime 2's is left")
	inner2, err := l2.Acquire(ctx) // runtime 2 re-enters X
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "runtime 2's two holds")
	t.Logf("Extend: %v", await(t, extended, 3*time.Second, "the Extend"))
	time.Sleep(time.Until(replyAt) + 500*time.Millisecond) // the Extend's reply comes; what it gives back runs
	t.Logf("Redis: %v", direct.HGetAll(ctx, name).Val())
	assert.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "the late Extend gave runtime 1's hold back a second time: it released one of runtime 2's")
	innerUnlockLetsOthersTry(t, ctx, p2, direct, other, name, owner, inner2, outer2)
	_ = outer2.Unlock(ctx)
}

// RT38-1, the same give-back after a plain Unlock: no loss needed. Runtime
// 1's Extend is in flight (its reply late) when its caller unlocks; the
// Unlock releases runtime 1's hold (count 1, runtime 2's); runtime 2
// re-enters (count 2); the Extend's reply finds the grant released and
// gives back what it counted when sent (1 hold while count 2, the mark):
// one of runtime 2's two holds.
func TestRedTeam38LateExtendGivesBackAHoldItsUnlockReleased(t *testing.T) {
	t.Parallel()
	p, p2, direct, rt1, rt2, other := sharedOwnerRuntimes(t, actorlock.WithCallTimeout(3*time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt38-late-extend-unlocked", "owner-rt38-1b"
	l2 := rt2.Lock(name, actorlock.WithOwner(owner))
	outer2, err := l2.Acquire(ctx)
	require.NoError(t, err)
	h1, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(10*time.Second))
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "one owner id, a hold in each runtime")
	replyAt := time.Now().Add(1500 * time.Millisecond)
	slow := p.on(1, delayReply, 1500*time.Millisecond, func(c respCommand) bool { return isExtendOn(c, name, owner) })
	extended := make(chan error, 1)
	go func() { extended <- h1.Extend(ctx, 20*time.Second) }()
	await(t, slow.ran, time.Second, "runtime 1's Extend, run by Redis")
	require.NoError(t, h1.Unlock(ctx), "runtime 1 unlocks while its Extend's reply is on its way")
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left")
	inner2, err := l2.Acquire(ctx) // runtime 2 re-enters X
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "runtime 2's two holds")
	t.Logf("Extend: %v", await(t, extended, 3*time.Second, "the Extend"))
	time.Sleep(time.Until(replyAt) + 500*time.Millisecond) // the Extend's reply comes; what it gives back runs
	t.Logf("Redis: %v", direct.HGetAll(ctx, name).Val())
	assert.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "the late Extend gave back runtime 1's released hold: it released one of runtime 2's")
	innerUnlockLetsOthersTry(t, ctx, p2, direct, other, name, owner, inner2, outer2)
	_ = outer2.Unlock(ctx)
}

// RT38-3 (liveness: a lock held by nobody for a lease; "an acquisition too
// few replicas confirmed is undone" broken for re-entries). Fixed:
// unconfirmed gives back with the grant's mark (scripts.Grant.Mark).
//
// unconfirmed (actors/lock.go) undoes a grant too few replicas confirmed
// with giveBack(..., g.Token): the grant's fencing token, which the
// give-back's script now compares with the holds' mark. For a fresh grant
// the two are one; a re-entry's token is not its holds' mark, so the undo
// is refused (count or mark differs), dropped, and the re-entry's count
// stays in Redis; each of the re-entry's tries (WithReplicaSyncAttempts)
// leaves one more. Once the owner unlocks what it holds, Redis still counts
// those holds: the lock stays, held by nobody, for its lease.
//
// An acquisition with replica sync holds; the replica is detached (a
// lagging replica); a re-entry is refused with ErrReplicaSync (3 tries);
// the outer hold is unlocked.
func TestRedTeam38UnconfirmedReentryIsNeverUndone(t *testing.T) {
	t.Parallel()
	master, replica := replicaPair(t)
	ctx := ctxFor(t, 30*time.Second)
	direct := client(t, master.Addr)
	rt := newRuntime(t, client(t, master.Addr), actorlock.WithReplicaSync(1, 200*time.Millisecond))
	other := newRuntime(t, direct)
	const name = "rt38-unconfirmed-reentry"
	outer, err := rt.Lock(name).Acquire(ctx)
	require.NoError(t, err, "the replica confirms the first grant")
	detach(t, replica)
	_, err = rt.Lock(name).Acquire(outer.Context(), actorlock.WaitTime(3*time.Second))
	require.ErrorIs(t, err, actorlock.ErrReplicaSync, "no replica confirms the re-entry")
	time.Sleep(300 * time.Millisecond) // the undos run
	t.Logf("after the refused re-entry: Redis %v", direct.HGetAll(ctx, name).Val())
	assert.Equal(t, "1", direct.HGet(ctx, name, outer.Owner()).Val(), "the unconfirmed re-entry's holds are undone: the outer hold is left")
	require.NoError(t, outer.Unlock(ctx))
	time.Sleep(300 * time.Millisecond)
	t.Logf("after the outer Unlock: Redis %v (PTTL %v)", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	if _, err := other.Lock(name).TryAcquire(ctx); err != nil {
		t.Fatalf("every acquisition was unlocked or refused, yet the lock is held (by nobody, for %v): %v", direct.PTTL(ctx, name).Val(), err)
	}
}

// detach cuts a replica off its master: it keeps trying to reach a port
// nobody listens on, and receives nothing (a lagging replica).
func detach(t *testing.T, replica *redisserver.Server) {
	t.Helper()
	require.NoError(t, client(t, replica.Addr).Do(ctxFor(t, 5*time.Second), "REPLICAOF", "127.0.0.1", "1").Err())
}

// sharedOwnerRuntimes is one Redis behind two proxies, each carrying a
// runtime (runtime 1 with opts) that will hold one WithOwner id, and an
// unproxied runtime for another owner; both proxied runtimes have their
// scripts loaded, so that a script's first call is not a load.
func sharedOwnerRuntimes(t *testing.T, opts ...actorlock.Option) (p, p2 *respProxy, direct *redis.Client, rt1, rt2, other *actorlock.Runtime) {
	t.Helper()
	srv := startRedis(t)
	p, p2 = startRESPProxy(t, srv.Addr), startRESPProxy(t, srv.Addr)
	direct = client(t, srv.Addr)
	rt1 = newRuntime(t, client(t, p.Addr()), opts...)
	rt2 = newRuntime(t, client(t, p2.Addr()))
	warmScripts(t, rt1)
	warmScripts(t, rt2)
	return p, p2, direct, rt1, rt2, newRuntime(t, direct)
}

// innerUnlockLetsOthersTry unlocks runtime 2's inner hold of owner, its
// reply 1 s late, so that another owner tries while runtime 2 learns
// nothing yet: the lock must stay held by runtime 2's outer hold.
func innerUnlockLetsOthersTry(t *testing.T, ctx context.Context, p2 *respProxy, direct *redis.Client, other *actorlock.Runtime, name, owner string, inner2, outer2 *actorlock.Held) {
	t.Helper()
	late := p2.on(1, delayReply, time.Second, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- inner2.Unlock(ctx) }()
	await(t, late.ran, time.Second, "runtime 2's inner Unlock, run by Redis")
	t.Logf("after runtime 2's inner Unlock: Redis %v", direct.HGetAll(ctx, name).Val())
	othersTry(t, ctx, other.Lock(name), outer2, "another owner while runtime 2's outer hold is held")
	t.Logf("inner Unlock: %v", await(t, unlocked, 3*time.Second, "runtime 2's inner Unlock"))
}
