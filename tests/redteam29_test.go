package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The twenty-ninth red-team pass, over 04f92f6^..6e4b49f (Close ends every
// acquisition at once; drains/keepDrains/drainMore; a late Extend prolongs
// Close's release only on a reply that came while the holds were surely in
// Redis, and extends nothing after its hold's validity).

// RT29-1 (two holders): RT23-1's fix gives a departed owner's release
// (Close's drain) its holds' validity as its deadline in Redis
// (Guard.Until), since an unconditional release that lands after the holds
// expired deletes a fresh hold of the WithOwner id taken through another
// runtime. A plain Unlock's release is the same unconditional script
// (IfCount -1, no token), and carries only its call's deadline: sent while
// the hold is valid but held back on its way, it lands after the hold
// expired in Redis and runtime 2 took the id afresh, and deletes runtime
// 2's hold under its live Held. A third owner gets the lock. Runtime 1's
// Unlock reports success.
// docs/guarantees.md, "Mutual exclusion on one Redis master"; docs/design.md's
// RT23-1 row.
func TestRedTeam29LateUnlockReleasesAFreshHoldOfItsOwnerID(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt29-late-unlock-of-fresh-hold", "owner-rt29-1"
	h1, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
	require.NoError(t, err)
	// The Unlock's release reaches Redis 2.5 s late: within its call's
	// deadline (3 s call timeout), after the hold's 1.5 s lease.
	held := p.on(1, holdCommand, 2500*time.Millisecond, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- h1.Unlock(ctx) }()
	await(t, held.hits, 2*time.Second, "the Unlock's release, on its way (held back)")
	freedWithin(t, ctx, direct, name, 3*time.Second, "runtime 1's hold expires (its 1.5 s LeaseTime)")
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(20*time.Second))
	require.NoError(t, err)
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2 holds the id afresh")
	await(t, held.ran, 3*time.Second, "the Unlock's release reaches Redis")
	// Refused in Redis as past its hold's validity, it reports the hold
	// lost (RT32-1: it reported the script's "did not run").
	require.ErrorIs(t, await(t, unlocked, 3*time.Second, "the Unlock's answer"), actorlock.ErrLost, "runtime 1's Unlock")
	t.Logf("Redis after the late release: %v", direct.HGetAll(ctx, name).Val())
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}

// RT29-2 (two holders): a newer give-back hands its token to the owner's
// older ones (giveBack: "the counter does not go back, so the older ones
// expect the newer's token"). Runtime 1 holds the WithOwner id X (1.5 s
// LeaseTime) and re-enters it (TryAcquire through a second WithOwner
// handle); the re-entry is held back on its way. The outer hold's validity
// passes: it is lost and its give-back queued (expect count 1, token T1).
// Redis expires it; runtime 2 takes X afresh (count 1, T2). The re-entry
// lands and re-enters runtime 2's hold (count 2, T3). Its grant comes back
// while the outer hold's give-back is out, so it is given back (expect 2,
// T3) and hands T3 to the outer hold's give-back. The newer runs (count 1:
// runtime 2's hold), then the older, expecting count 1 and token T3, finds
// exactly that and deletes runtime 2's hold under its live Held: a third
// owner gets the lock.
// docs/guarantees.md, "A lost hold is given back" ("a give-back that lands
// after its hold expired spares a fresh hold of the same id taken
// meanwhile"), and "Mutual exclusion on one Redis master".
func TestRedTeam29LateReentryHandsItsTokenToTheLostHoldsGiveBack(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt29-late-reentry-hands-token", "owner-rt29-2"
	l1 := rt1.Lock(name, actorlock.WithOwner(owner))
	outer, err := l1.Acquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
	require.NoError(t, err)
	// The re-entry reaches Redis 2.2 s late: after the outer hold's lease,
	// within its call's deadline.
	held := p.on(1, holdCommand, 2200*time.Millisecond, func(c respCommand) bool { return isGuardedAcquire(c, name, owner) && !settling(c) })
	undos := p.on(10, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) })
	reentered := make(chan gotHold, 1)
	go func() {
		h, err := l1.TryAcquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
		reentered <- gotHold{h, err}
	}()
	await(t, held.hits, 2*time.Second, "the re-entry, on its way (held back)")
	freedWithin(t, ctx, direct, name, 3*time.Second, "runtime 1's hold expires (its 1.5 s LeaseTime)")
	select {
	case <-outer.Done():
	case <-time.After(time.Second):
		t.Fatal("the outer hold's Done stays open past its lease")
	}
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(20*time.Second))
	require.NoError(t, err)
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2 holds the id afresh")
	await(t, held.ran, 3*time.Second, "the re-entry reaches Redis")
	got := await(t, reentered, 3*time.Second, "the re-entry's answer")
	t.Logf("runtime 1's re-entry: %v", got.err)
	if got.err == nil {
		_ = got.h.Unlock(ctx)
	}
	time.Sleep(700 * time.Millisecond) // the give-backs run
	for len(undos.ran) > 0 {
		_, argv, _ := (<-undos.ran).script()
		t.Logf("give-back run: holds %s, expecting count %s and token %s", argv[1], argv[3], argv[4])
	}
	t.Logf("Redis after the give-backs: %v", direct.HGetAll(ctx, name).Val())
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}
