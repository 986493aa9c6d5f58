package tests

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// The fifth red-team pass over issue 31's and issue 33's runtime: each
// test failed before its defect was fixed.

// RT5-1 (pass 4's suspicion 2). A release parked behind its owner's
// unsettled re-entry resumes when the settling ends (giveback.go settled:
// appended to the steps), and relies on the re-entry's give-back being
// queued before it (giveBack: a.first). But releaseStep.start parks only
// while the owner has an unsettled *attempt* (attempting), not while its
// give-back is out (settlingFor): when the give-back is refused once
// (Redis answered BUSY for its whole call), undoStep.apply re-runs it
// 100 ms later (retryLater), and the release runs in between. It takes the
// re-entry's hold (count 2 -> 1, StillHeld) instead of the outer one; the
// give-back, which expects count 2, then finds 1 and does nothing, and
// `undone` is not told (the hold here is not abandoned). Unlock reports
// success, nothing renews the lock, and Redis keeps it, held by nobody,
// for the rest of the re-entry's lease: every other owner is locked out
// that long. Releases now wait while a give-back of their owner is out
// (docs/design.md, the interleavings the design rules out; docs/guarantees.md,
// "Exactly once" and "Nothing is left behind".)
func TestRedTeam5ReleaseRunsBetweenARefusedGiveBackAndItsRetry(t *testing.T) {
	t.Parallel()
	const callTimeout, lease = time.Second, 20 * time.Second
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	rt := newRuntime(t, rdb, actorlock.WithCallTimeout(callTimeout), actorlock.WithWatchdog(lease))
	warmScripts(t, rt)
	direct := client(t, srv.Addr)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 60*time.Second)
	const name = "rt5-release-between-giveback"
	outer, err := rt.Lock(name).Acquire(ctx)
	require.NoError(t, err)
	owner := outer.Owner()

	var answer atomic.Bool
	reentry := func(c respCommand) bool {
		keys, _, ok := c.script()
		return ok && len(keys) == 4 && keys[0] == name && ownerIn(c, rt) == owner // lock_acquire
	}
	dropped := p.on(4, dropReply, 0, func(c respCommand) bool { return reentry(c) && !settling(c) })
	held := p.on(1000, dropReply, 0, func(c respCommand) bool { return !answer.Load() && reentry(c) && settling(c) })
	// The re-entry's give-back is refused (BUSY) for a call timeout and a
	// bit from its first try: its first run fails, its retry passes.
	var firstUndo, refusals atomic.Int64
	p.on(1000, busy, 0, func(c respCommand) bool {
		if !isRelease(c, name, owner, true) || settling(c) {
			return false
		}
		now := time.Now().UnixNano()
		firstUndo.CompareAndSwap(0, now)
		if now-firstUndo.Load() >= int64(callTimeout+300*time.Millisecond) {
			return false
		}
		refusals.Add(1)
		return true
	})

	_, err = rt.Lock(name).TryAcquire(outer.Context())
	require.Error(t, err, "no try of the re-entry was answered")
	await(t, dropped.ran, time.Second, "the re-entry's first try, run by Redis")
	await(t, held.hits, 5*time.Second, "the re-entry's settling")
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "the re-entry ran: Redis counts 2")

	unlocked := make(chan error, 1)
	go func() { unlocked <- outer.Unlock(ctx) }()
	time.Sleep(300 * time.Millisecond) // the Unlock is parked behind the settling
	answer.Store(true)
	err = await(t, unlocked, 15*time.Second, "the Unlock, once the re-entry is settled")
	t.Logf("Unlock: %v; give-back tries refused: %d; Redis now: %v", err, refusals.Load(), direct.HGetAll(ctx, name).Val())
	require.NoError(t, err)
	require.Positive(t, refusals.Load(), "the give-back was refused at least once")

	// Nobody holds the lock: the re-entry was given back, the outer hold
	// unlocked. Redis must let another owner in (well before the lease).
	require.Eventually(t, func() bool { return direct.Exists(ctx, name).Val() == 0 }, 5*time.Second, 20*time.Millisecond,
		"nobody holds the lock, yet Redis keeps it: %v (pttl %v)", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	h, err := other.Lock(name).TryAcquire(ctx)
	require.NoError(t, err, "another owner gets the free lock")
	assert.NoError(t, h.Unlock(ctx))
}

// RT5-2 (pass 4's suspicion 1). A ReleaseRequest of an owner whose re-entry
// is being settled is parked (releaseStep.start: attempting). If the
// owner's hold is then lost (its validity passes: lockActor.lost), the
// grant ends but its parked release is not answered: lost() ends grants
// without answering their releases, and drain's releaseAll, which would,
// only sees the holds still there. The release is answered only when it
// resumes after the settling; Close whose ctx runs out first stops the
// actor, and stop() drops every step and parked step with a grant
// without answering it. The owner actor never gets a ReleaseResponse
// (a Go caller's ask returns ErrClosed; an actor's request has nothing of
// the kind). (docs/guarantees.md "Nothing is left behind": Close "fails
// every waiter with ErrClosed"; docs/actors.md: requests are answered.)
func TestRedTeam5ParkedReleaseByMessageIsAnsweredAtClose(t *testing.T) {
	t.Parallel()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	p, _, rt := proxied(t, actorlock.WithCallTimeout(time.Second), actorkit.WithActorSystem(sys))
	const name = "rt5-parked-release-by-message"
	owner := spawnProbe(t, sys)
	owner.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "a1", Name: name, Kind: messages.Kind_KIND_LOCK, LeaseMs: 1500})
	resp := receive[*messages.AcquireResponse](t, owner, 3*time.Second)
	require.True(t, resp.Acquired, "%v", resp.Error)
	ownerID := resp.Owner

	reentry := func(c respCommand) bool {
		keys, _, ok := c.script()
		return ok && len(keys) == 4 && keys[0] == name && ownerIn(c, rt) == ownerID // lock_acquire
	}
	dropped := p.on(4, dropReply, 0, func(c respCommand) bool { return reentry(c) && !settling(c) })
	settles := p.on(1000, dropReply, 0, func(c respCommand) bool { return reentry(c) && settling(c) })
	owner.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "a2", Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: resp.OwnerToken, LeaseMs: 1500})
	re := receive[*messages.AcquireResponse](t, owner, 5*time.Second)
	require.False(t, re.Acquired, "no try of the re-entry was answered")
	await(t, dropped.ran, time.Second, "the re-entry's first try, run by Redis")
	await(t, settles.hits, 5*time.Second, "the re-entry's settling")

	owner.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "r1", Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: resp.OwnerToken})
	lost := receive[*messages.LockLost](t, owner, 3*time.Second) // the hold's lease_ms ran out
	t.Logf("lost: %s", lost.Reason)

	closeCtx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t.Logf("Close: %v", rt.Close(closeCtx))
	rel := receive[*messages.ReleaseResponse](t, owner, 5*time.Second)
	require.NotNil(t, rel.Error, "the release of a hold lost before it ran did not release: %v", rel)
	assert.Equal(t, messages.ErrorCode_ERROR_CODE_LOST, rel.Error.Code, "the release is told what became of its hold: %v", rel.Error)
	assert.Equal(t, "r1", rel.RequestId)
}
