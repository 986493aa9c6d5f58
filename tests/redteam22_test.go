package tests

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The twenty-second red-team pass, over af3e055 (undoStep parked while a
// release of its owner is being settled: lockActor.unreleasing,
// unparkUndos; a departed owner's release run again until
// releaseStep.giveUpAt; Batched's earliest-deadline pipeline; endHold
// within the caller's deadline).

// RT22-1 (two holders): RT21-1's fix runs a release of every hold of a
// departed owner (Close's drain, an owner actor that stopped: grant nil)
// again after a refusal, until giveUpAt: the first failure plus a watchdog
// lease (releaseStep.lease of a grant-less release), whatever the holds'
// own leases. Each run is an unconditional release (IfCount -1, no token:
// releaseStep.call) of the owner's field. Once the holds it was queued for
// have expired in Redis, a WithOwner id taken afresh through another
// runtime (a restarted process keeping its owner id: the case
// TestLateGiveBackSparesAFreshHoldOfItsOwnerID guards for give-backs) has
// the same field, and the next retry deletes that runtime's hold. Runtime
// 1 holds X with a 1 s LeaseTime; Close's release is refused (BUSY) until
// the hold has expired and runtime 2 has taken X afresh (watchdog); the
// next retry deletes runtime 2's hold, and a third owner takes the lock
// while runtime 2's Held is valid.
// docs/guarantees.md, "A lost hold is given back" ("a give-back that
// lands after its hold expired spares a fresh hold of the same id taken
// meanwhile"), and "Mutual exclusion on one Redis master".
func TestRedTeam22DepartedReleaseRetriedPastItsHoldsReleasesAFreshHoldOfItsOwnerID(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt22-departed-release-retried", "owner-rt22-1"
	_, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	var open atomic.Bool
	refused := p.on(100000, busy, 0, func(c respCommand) bool { return !open.Load() && isRelease(c, name, owner, false) })
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		_ = rt1.Close(cctx)
	}()
	await(t, refused.hits, 2*time.Second, "Close's release, refused (BUSY)")
	freedWithin(t, ctx, direct, name, 3*time.Second, "runtime 1's hold expires (its 1 s LeaseTime)")
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2 holds the id afresh")
	open.Store(true) // Redis takes commands again
	time.Sleep(700 * time.Millisecond)
	t.Logf("refused %d times; Redis now %v", len(refused.hits), direct.HGetAll(ctx, name).Val())
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}

// RT22-3 (safety: an item lost). A Poll whose pop (a raw LMOVE into a hold
// of its own) is not answered by the caller's deadline ends that hold
// (endHold: scripts.Taken gives back what the hold has). RT21-3's fix
// bounds the ending's first try by the caller's deadline, which has always
// passed by then (the pop ran until it): the first try is never sent, and
// the ending goes to a goroutine of its own (persist), which Close does not
// wait for (it is not one of the runtime's calls, env.calls: "Not a
// worker") and cuts off when it stops giving back (Handle.Stop:
// stopGivingBack). Before, the first try had a call timeout of its own,
// retried what was refused (retryUnknown), and ran before Poll returned.
// Here the pop runs at once (the item moves into its hold) and its reply
// comes 1 s late; the ending's connection is reset for 150 ms (a blip the
// first try's retries ride out: 10, 40, 160 ms apart); Poll with a 300 ms
// ctx returns, the program closes its runtime, and the item stays in a
// hold nobody ends (a LIST with no expiry): lost. docs/design.md (a pop's
// hold that "cannot be ended at once ... the ending is carried through";
// no item lost), as TestRedTeam19WonRaceGiveBackQueuedPastItsCallTimeoutIsLost.
func TestRedTeam22PollPastItsDeadlineLeavesItsHoldToClose(t *testing.T) {
	t.Parallel()
	const ct = time.Second
	const name = "rt22-poll-hold-close"
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(ct))
	ctx := ctxFor(t, 30*time.Second)
	q := rt.BlockingQueue(name)
	require.NoError(t, q.Offer(ctx, []byte("warm")))
	_, ok, err := q.Poll(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, direct.RPush(ctx, name, "item").Err())

	pop := p.on(1, delayReply, ct, func(c respCommand) bool { return c.name() == "LMOVE" && len(c) > 1 && c[1] == name })
	var blip atomic.Bool
	blip.Store(true)
	ending := p.on(1000, refuse, 0, func(c respCommand) bool { return blip.Load() && c.scriptOn(name) })
	go func() {
		<-ending.hits
		time.Sleep(150 * time.Millisecond)
		blip.Store(false)
	}()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, _, err = q.Poll(short)
	t.Logf("Poll: %v", err)
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	t.Logf("Close: %v", rt.Close(cctx))
	await(t, pop.ran, time.Second, "the pop, run by Redis (its reply late)")
	deadline := time.Now().Add(2 * time.Second)
	for direct.LLen(ctx, name).Val() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, k := range direct.Keys(ctx, "actorlock_request:{"+name+"}:*").Val() {
		if direct.Type(ctx, k).Val() == "list" {
			t.Logf("hold %s keeps %v (TTL %v)", k, direct.LRange(ctx, k, 0, -1).Val(), direct.PTTL(ctx, k).Val())
		}
	}
	assert.Equal(t, []string{"item"}, direct.LRange(ctx, name, 0, -1).Val(), "the item the Poll did not return is back in the queue")
}
