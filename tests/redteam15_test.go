package tests

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// RT15-1: a give-back of READ holds does not check the fencing counter.
// TestLateGiveBackSparesAFreshHoldOfItsOwnerID for a read-write lock's
// read side: runtime 1's first read attempt (WithOwner) reaches Redis
// 1.3 s late, after its caller stopped waiting; the grant (1 s lease) is
// given back, every try refused until it expired and runtime 2 (the same
// owner id: a restarted process) took a fresh read. The give-back's try
// then finds count 1 and deletes runtime 2's read: a writer gets in while
// runtime 2's read is valid.
func TestRedTeam15LateReadGiveBackSparesAFreshReadOfItsOwnerID(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(2*time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt15-late-read-giveback", "owner-restarted"
	late := p.on(1, holdCommand, 1300*time.Millisecond, func(c respCommand) bool { return isAcquireOn(c, name, owner) })
	var open atomic.Bool
	p.on(1000, refuse, 0, func(c respCommand) bool { return !open.Load() && isRelease(c, name, owner, true) })
	_, err := rt1.ReadWriteLock(name, actorlock.WithOwner(owner)).ReadLocker().Acquire(ctx, actorlock.LeaseTime(time.Second), actorlock.WaitTime(500*time.Millisecond))
	require.ErrorIs(t, err, actorlock.ErrNotAcquired, "the caller stopped waiting before its first attempt ran")
	await(t, late.ran, 3*time.Second, "the late first attempt, granted by Redis")
	require.Eventually(t, func() bool { return direct.Exists(ctx, name).Val() == 0 }, 3*time.Second, 5*time.Millisecond,
		"the late grant expires at its lease while its give-back is refused")
	h2, err := rt2.ReadWriteLock(name, actorlock.WithOwner(owner)).ReadLocker().Acquire(ctx)
	require.NoError(t, err, "runtime 2 once the late grant expired")
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "a fresh read, not a re-entry of the late grant")
	tries := p.on(1, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) && !settling(c) })
	open.Store(true)
	await(t, tries.ran, 5*time.Second, "a try of runtime 1's give-back, run by Redis")
	time.Sleep(200 * time.Millisecond) // its settle, if any
	othersTry(t, ctx, other.ReadWriteLock(name).WriteLocker(), h2, "a writer while runtime 2 reads")
	require.NoError(t, h2.Err(), "runtime 2's read is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's read is left in Redis")
	require.NoError(t, h2.Unlock(ctx))
}

// RT15-2: the give-back of an attempt whose outcome could not be settled
// (Redis unreachable for as long as its guard is sure to live) checks no
// fencing token (lockActor.attempted: giveBack(..., 0, ...)), so once Redis
// is reachable again it deletes a fresh hold of the same WithOwner id taken
// through another runtime (a restarted process) after the unknown grant
// expired. Runtime 1's first attempt runs in Redis (1 s lease), its reply
// is lost, and every later call of runtime 1 on the name (retries, settles,
// give-back tries) is refused for 4 s; runtime 2 takes a fresh hold of the
// owner id; then runtime 1 reaches Redis and its give-back, finding count 1,
// deletes runtime 2's hold while runtime 2 holds it. Fixed: with no token
// to check, only an owner id the runtime made is given back by count.
func TestRedTeam15UnknowableAttemptGiveBackSparesAFreshHoldOfItsOwnerID(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(500*time.Millisecond))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt15-unknowable-giveback", "owner-restarted-2"
	mine := func(c respCommand) bool { return c.scriptOn(name, owner) }
	first := p.on(1, dropReply, 0, mine)
	var open atomic.Bool
	p.on(100000, refuse, 0, func(c respCommand) bool { return !open.Load() && mine(c) })
	_, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.Error(t, err, "the attempt's reply was lost")
	await(t, first.ran, time.Second, "the first attempt, granted by Redis")
	require.Eventually(t, func() bool { return direct.Exists(ctx, name).Val() == 0 }, 3*time.Second, 5*time.Millisecond,
		"the unknown grant expires at its lease")
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err, "runtime 2 once the grant expired")
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "a fresh hold")
	time.Sleep(1500 * time.Millisecond) // runtime 1 gives up settling (2 s after its attempt), and gives back
	tries := p.on(1, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) && !settling(c) })
	open.Store(true)
	// No give-back is sent (giveBackUnknown: a WithOwner id's unknown
	// grant is left to expire); had one been, its tries run every 100 ms
	// or so once Redis answers.
	time.Sleep(time.Second)
	select {
	case <-tries.ran:
		t.Error("runtime 1 gave back a grant of unknown outcome by count alone")
	default:
	}
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	require.NoError(t, h2.Unlock(ctx))
}
