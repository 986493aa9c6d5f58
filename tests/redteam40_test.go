package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The fortieth red-team pass, over the holds' mark (b0e0d01..f61ee15).

// RT40-1 (safety: two holders; "a give-back releases only this runtime's
// grants" broken for a WithOwner id held through another runtime too).
//
// A hold abandoned while its Unlock's release is in flight (its reply not
// back yet: no settling) is given back (giveBackHold) expecting the count
// with that release's hold in it. While the actor runs, the give-back waits
// for the release (one step in flight) and the release's outcome moves
// what it expects (undone). But when Close's ctx ends first, the stopping
// actor (lockActor.stop) fires what is left, the give-back included: it
// skips a give-back only while a release of its owner is being settled
// (unreleasing), not while one is in flight. The release ran in Redis; the
// count is one lower than the give-back expects, and the fencing counter
// that refused it once anyone had re-entered since is no longer checked.
// Another runtime holding the same owner id re-enters, the count is back
// at what the give-back expects, and the give-back releases runtime 1's
// two grants, one of which its release had already released: one of
// runtime 2's holds goes with them. Fixed: a stopping actor sends no
// give-back of the owner's side whose release is in flight (stop).
//
// Runtime 2 holds X (count 1). Runtime 1 holds X twice with a 1 s
// LeaseTime (count 3). Runtime 1 unlocks its inner hold: the script runs
// (count 2), its reply comes 3 s late (within the 5 s call timeout).
// Runtime 1's hold ends at its validity; its give-back (2 holds while count
// 3) waits behind the release. Runtime 2 re-enters (count 3). Runtime 1
// closes with a 300 ms ctx: its lock actor stops with the release still in
// flight and fires the give-back: count 1, for runtime 2's two holds.
func TestRedTeam40StoppingActorGivesBackBesideAReleaseInFlight(t *testing.T) {
	t.Parallel()
	p, p2, direct, rt1, rt2, other := sharedOwnerRuntimes(t, actorlock.WithCallTimeout(5*time.Second))
	ctx := ctxFor(t, 40*time.Second)
	const name, owner = "rt40-stop-giveback-beside-release", "owner-rt40-1"
	// Older lock actors, stopped after the name's (as in RT20-1): they keep
	// Close from cancelling the runtime's calls for a moment after the
	// name's actor fired what it had left.
	for i := range 300 {
		h, err := rt1.Lock(fmt.Sprintf("rt40-older-%d", i)).Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, h.Unlock(ctx))
	}
	l2 := rt2.Lock(name, actorlock.WithOwner(owner))
	outer2, err := l2.Acquire(ctx)
	require.NoError(t, err)
	l1 := rt1.Lock(name, actorlock.WithOwner(owner))
	a1, err := l1.Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	a2, err := l1.Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	require.Equal(t, "3", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold and runtime 1's two")

	// Runtime 1's inner Unlock runs at once; its reply comes 3 s late.
	late := p.on(1, delayReply, 3*time.Second, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- a2.Unlock(ctx) }()
	await(t, late.ran, time.Second, "runtime 1's inner Unlock, run by Redis")
	require.Eventually(t, func() bool { return direct.HGet(ctx, name, owner).Val() == "2" }, time.Second, 5*time.Millisecond,
		"the inner Unlock ran: runtime 2's hold and runtime 1's outer one")
	endsLost(t, a1, 2*time.Second, "runtime 1's hold ends at its LeaseTime")
	inner2, err := l2.Acquire(ctx) // runtime 2 re-enters X while runtime 1's release is in flight
	require.NoError(t, err)
	require.Equal(t, "3", direct.HGet(ctx, name, owner).Val(), "runtime 2's two holds and runtime 1's outer one")

	cctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t.Logf("runtime 1's Close: %v", rt1.Close(cctx))
	time.Sleep(500 * time.Millisecond) // what the stopping actor fired lands
	t.Logf("Redis after runtime 1's Close: %v", direct.HGetAll(ctx, name).Val())
	n, _ := direct.HGet(ctx, name, owner).Int()
	assert.GreaterOrEqual(t, n, 2, "runtime 1's give-back released one of runtime 2's two holds")

	innerUnlockLetsOthersTry(t, ctx, p2, direct, other, name, owner, inner2, outer2)
	t.Logf("runtime 1's inner Unlock: %v", await(t, unlocked, 5*time.Second, "runtime 1's inner Unlock"))
	_ = outer2.Unlock(ctx)
}
