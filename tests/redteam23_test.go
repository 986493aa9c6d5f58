package tests

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// The twenty-third red-team pass, over af3e055..5be3fbd (98797bd: a
// departed owner's release runs only before its holds' validity,
// releaseStep.giveUpAt; dfb1d3d: requests from futures refused for
// Acquire, Take and SemaphoreAcquire; fde8114: newerUndo).

// RT23-1 (two holders): 98797bd lets a release of every hold of a departed
// owner (Close's drain: grant nil, unconditional: IfCount -1, no token)
// *start* only before the validity its holds had when it was queued
// (releaseStep.start's giveUpAt check). What it checks is when the run is
// sent, not when it can act: an attempt of the run acts in Redis until its
// call's deadline plus half a call timeout (scripts.Clock), which may be
// well past the holds' validity and their expiry. Runtime 1 holds X with
// a 1 s LeaseTime and closes at once; the drain's release is held back on
// its way to Redis for 2.5 s (call timeout 3 s: it may act until about
// 4.5 s after it was sent). The hold expires at 1 s, runtime 2 takes the id X
// afresh, the release lands and deletes runtime 2's hold, and a third
// owner takes the lock while runtime 2's Held is valid: RT22-1 again,
// by a command in transit instead of a retry.
// docs/guarantees.md, "A lost hold is given back" ("a give-back that
// lands after its hold expired spares a fresh hold of the same id taken
// meanwhile"), and "Mutual exclusion on one Redis master".
func TestRedTeam23DepartedReleaseLandingPastItsHoldsReleasesAFreshHold(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt23-departed-release-lands-late", "owner-rt23-1"
	_, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	held := p.on(1, holdCommand, 2500*time.Millisecond, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		_ = rt1.Close(cctx)
	}()
	await(t, held.hits, 2*time.Second, "Close's release, on its way (held back)")
	freedWithin(t, ctx, direct, name, 3*time.Second, "runtime 1's hold expires (its 1 s LeaseTime)")
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2 holds the id afresh")
	await(t, held.ran, 3*time.Second, "Close's release reaches Redis")
	t.Logf("Redis after the late release: %v", direct.HGetAll(ctx, name).Val())
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}

// RT23-2 (API: a live actor refused): dfb1d3d refuses an AcquireRequest,
// TakeRequest or SemaphoreAcquireRequest whose sender's id starts with
// "future" (validateWaiter), to keep protoactor futures (ids
// "future$<n>") out. The prefix is any actor's whose name begins so: an
// actor spawned as "futures-desk" (or any child of one: ids are
// "<parent>/<child>") asks with Context.Request, as the error tells it to,
// and is refused INVALID_ARGUMENT ("the sender is a future"), every time.
// docs/actors.md: an actor acquires by sending an AcquireRequest with
// Context.Request.
func TestRedTeam23ActorNamedFutureSomethingIsRefused(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	sys := actorkit.System(rt)
	inbox := make(chan proto.Message, 8)
	pid, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *sendTo:
			ctx.Request(m.to, m.msg)
		case proto.Message:
			inbox <- m
		}
	}), "futures-desk-"+t.Name())
	require.NoError(t, err)
	t.Cleanup(func() { sys.Root.Stop(pid) })
	sys.Root.Send(pid, &sendTo{to: actorkit.PID(rt), msg: &messages.AcquireRequest{RequestId: "a1", Name: "rt23-futures-desk", Kind: messages.Kind_KIND_LOCK}})
	res := await(t, inbox, 3*time.Second, "the AcquireRequest's answer")
	resp, ok := res.(*messages.AcquireResponse)
	require.True(t, ok, "answered with %T", res)
	require.Nil(t, resp.GetError(), "an actor named %q is granted the free lock: %v", pid.GetId(), resp.GetError())
}

// RT23-3 (liveness: a lost hold left in Redis for an Extend's lease): a
// late Extend's give-back (extended → giveBack) is queued with the owner's
// count and token as they were when the Extend was *sent*, but, queued
// last, it counts as the newest sight of the owner (giveBack's order:
// newer give-backs run first, hand their token to the older ones, and
// undone lowers the newest queued one). An Extend sent before a re-entry
// is an older sight: the hold's give-back (count 2, the re-entry's token)
// takes the Extend's stale token, and the release in flight that lands
// lowers the Extend's give-back (to nothing: dropped) instead of the
// hold's. Every give-back is refused, and the lost hold stays in Redis
// for the Extend's 10 s, whoever waits. Here: X holds (LeaseTime 2 s),
// extends to 10 s (Redis runs it at once, its reply comes 2.6 s late),
// re-enters (LeaseTime 2 s), and unlocks the re-entry (its release held
// back 2.5 s): the hold's validity passes with the release in flight
// (abandonHold: give-back of 2), the Extend's reply comes (give-back of 1,
// token of the outer grant), then the release's (count 1).
// docs/guarantees.md, "A lost hold is given back" ("released in Redis as
// soon as Redis answers"; "an Extend whose reply came after its hold
// ended" gives back).
func TestRedTeam23LateExtendBeforeAReentryStrandsTheLostHold(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(5*time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt23-late-extend-strands"
	warm, err := rt.Lock("warm:extend").Acquire(ctx, actorlock.LeaseTime(2*time.Second))
	require.NoError(t, err)
	require.NoError(t, warm.Extend(ctx, 3*time.Second)) // the Extend script loaded
	require.NoError(t, warm.Unlock(ctx))
	l := rt.Lock(name)
	outer, err := l.Acquire(ctx, actorlock.LeaseTime(2*time.Second))
	require.NoError(t, err)
	owner := outer.Owner()
	ext := p.on(1, delayReply, 2600*time.Millisecond, func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && keys[0] == name && !guarded(keys) && len(argv) == 2 && argv[0] == "10000" && argv[1] == owner
	})
	extended := make(chan error, 1)
	go func() { extended <- outer.Extend(ctx, 10*time.Second) }()
	c := await(t, ext.ran, 2*time.Second, "the Extend, run by Redis (its reply late)")
	t0 := time.Now() // its reply reaches the runtime at t0 + 2.6 s
	t.Logf("Extend %q; PTTL %v", c, direct.PTTL(ctx, name).Val())
	inner, err := l.Acquire(outer.Context(), actorlock.LeaseTime(2*time.Second))
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "a re-entry")
	t.Logf("PTTL after the re-entry: %v", direct.PTTL(ctx, name).Val())
	// Reaches Redis at t0 + 3.4 s: after the hold's validity (about t0 +
	// 2 s) and the Extend's reply.
	rel := p.on(1, holdCommand, time.Until(t0.Add(3400*time.Millisecond)), func(c respCommand) bool { return isRelease(c, name, owner, false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- inner.Unlock(ctx) }()
	await(t, rel.hits, time.Second, "the re-entry's release, held back")
	endsLost(t, outer, 3*time.Second, "the hold did not end at its validity (its Extend unconfirmed)")
	t.Logf("lost: %v; Redis %v PTTL %v", outer.Err(), direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	require.Empty(t, rel.ran, "the release is still on its way")
	t.Logf("Extend: %v", await(t, extended, 5*time.Second, "the Extend's answer"))
	require.Empty(t, rel.ran, "the release is still on its way")
	await(t, rel.ran, 5*time.Second, "the release, run by Redis")
	t.Logf("Unlock: %v; Redis: %v (PTTL %v)", await(t, unlocked, 5*time.Second, "the Unlock"), direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	freedWithin(t, ctx, direct, name, 2*time.Second, "the lost hold is given back once Redis answered everything")
}
