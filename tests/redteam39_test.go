package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The thirty-ninth red-team pass, over the holds' mark (b63a8fe..d6b5bdb).

// RT39-1 (safety: two holders; "a give-back releases only this runtime's
// grants" broken for a WithOwner id held through another runtime too).
//
// A hold abandoned while its Unlock's release is being settled is given
// back (giveBackHold) expecting the count with that release's hold in it
// and the holds' mark. The release ran in Redis, but none of its replies
// nor its settles' came back: its outcome is unknowable (releaseUnknown),
// and nothing moves what the give-back expects (undone runs only for a
// known outcome). Redis now counts one hold fewer. The fencing counter
// refused such a give-back once anyone re-entered since; the mark does
// not move on a re-entry. Another runtime holding the same owner id
// re-enters, the count is back at what the give-back expects, and the
// give-back releases runtime 1's two grants, one of which its release had
// already released: one of runtime 2's holds goes with them. Runtime 2's
// inner Unlock then frees the lock under its outer hold.
//
// Fixed: a release whose outcome is unknowable voids its WithOwner
// owner's give-backs on that side (releaseUnknown): the holds expire within
// their lease.
//
// Runtime 2 holds X (count 1). Runtime 1 holds X twice with a 1 s
// LeaseTime (count 3). Runtime 1 unlocks its inner hold: the script runs
// (count 2), every reply and every settle's reply is lost. Runtime 1's
// hold ends at its validity; its give-back (2 holds while count 3, mark)
// waits for the settling. Runtime 2 re-enters (count 3). The settling
// gives up; the give-back runs.
func TestRedTeam39UnknowableReleaseLeavesItsHoldInTheGiveBack(t *testing.T) {
	t.Parallel()
	const ct = 300 * time.Millisecond
	p, p2, direct, rt1, rt2, other := sharedOwnerRuntimes(t, actorlock.WithCallTimeout(ct), actorlock.WithWatchdog(3*time.Second))
	ctx := ctxFor(t, 40*time.Second)
	const name, owner = "rt39-unknowable-release-giveback", "owner-rt39-1"
	l2 := rt2.Lock(name, actorlock.WithOwner(owner))
	outer2, err := l2.Acquire(ctx)
	require.NoError(t, err)
	l1 := rt1.Lock(name, actorlock.WithOwner(owner))
	a1, err := l1.Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	a2, err := l1.Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	require.Equal(t, "3", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold and runtime 1's two")

	// Every reply to runtime 1's inner Unlock is lost, its settles' too.
	lost := p.on(1000, dropReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	uctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	t.Logf("runtime 1's inner Unlock: %v", a2.Unlock(uctx))
	await(t, lost.ran, time.Second, "runtime 1's inner Unlock, run by Redis")
	require.Eventually(t, func() bool { return direct.HGet(ctx, name, owner).Val() == "2" }, time.Second, 5*time.Millisecond,
		"the inner Unlock ran: runtime 2's hold and runtime 1's outer one")
	endsLost(t, a1, 2*time.Second, "runtime 1's hold ends at its LeaseTime")
	inner2, err := l2.Acquire(ctx) // runtime 2 re-enters X while runtime 1 settles its release
	require.NoError(t, err)
	require.Equal(t, "3", direct.HGet(ctx, name, owner).Val(), "runtime 2's two holds and runtime 1's outer one")
	time.Sleep(4 * time.Second) // the settling gives up (about 3.6 s after the Unlock); the give-back runs
	p.stop(lost)
	t.Logf("Redis: %v", direct.HGetAll(ctx, name).Val())
	n, _ := direct.HGet(ctx, name, owner).Int()
	assert.GreaterOrEqual(t, n, 2, "runtime 1's give-back released one of runtime 2's two holds")

	innerUnlockLetsOthersTry(t, ctx, p2, direct, other, name, owner, inner2, outer2)
	_ = outer2.Unlock(ctx)
}
