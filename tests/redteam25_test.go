package tests

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The twenty-fifth red-team pass, over 51131bc..3048870 (give-backs of one
// owner's side run in runsBefore's order and wait for those before them;
// a departed owner's release carries its holds' validity as Guard.Until;
// no late-Extend give-back while one is pending; futures refused).

// isRenewalOf reports whether c is a watchdog renewal of lock name's owner.
func isRenewalOf(c respCommand, name, owner string) bool {
	keys, argv, ok := c.script()
	return ok && len(keys) == 1 && keys[0] == name && len(argv) == 2 && argv[1] == owner
}

// isGuardedAcquire reports whether c is an attempt (first, retry or
// settle) of the reentrant lock's acquire script for owner on name.
func isGuardedAcquire(c respCommand, name, owner string) bool {
	keys, argv, ok := c.script()
	return ok && keys[0] == name && guarded(keys) && len(argv) > 1 && argv[1] == owner
}

// RT25-1 (liveness: a lost hold left in Redis for its lease): a give-back
// waits for the give-backs that run before it (undoBefore), wherever they
// wait, but not for an attempt of its owner whose outcome is being settled
// (attempting), whose grant, once the settle finds it, is given back with
// the higher count (runsBefore would put it first). Here the owner holds
// (watchdog 3 s) and re-enters; the re-entry runs in Redis (count 2) but
// its reply is lost and its retries and settles are refused, so it is
// being settled when the outer hold is lost (every renewal from then on
// runs in Redis, its reply late). The hold's give-back (expecting 1) runs
// at once, meets count 2, is refused by count and dropped (nothing to run
// before it is pending yet); the settle then finds the grant, whose
// give-back (expecting 2) releases one hold: the lost outer hold stays in
// Redis, held by nobody, for the key's TTL (here the re-entry's 10 s lease;
// else the lease its late renewals gave it).
// docs/guarantees.md, "A lost hold is given back" ("released in Redis as soon as Redis answers").
func TestRedTeam25GiveBackRunsWhileAnAttemptIsSettled(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithWatchdog(3*time.Second), actorlock.WithCallTimeout(time.Second))
	ctx := ctxFor(t, 40*time.Second)
	const name = "rt25-giveback-while-attempt-settled"
	l := rt.Lock(name)
	outer, err := l.Acquire(ctx)
	require.NoError(t, err)
	owner := outer.Owner()
	time.Sleep(1200 * time.Millisecond) // one renewal confirmed
	require.NoError(t, outer.Err())
	// Every renewal from now on runs in Redis, its reply after the
	// hold's validity.
	p.on(100000, delayReply, 3500*time.Millisecond, func(c respCommand) bool { return isRenewalOf(c, name, owner) })
	first := p.on(1, dropReply, 0, func(c respCommand) bool { return isGuardedAcquire(c, name, owner) && !settling(c) })
	var open atomic.Bool
	refused := p.on(100000, refuse, 0, func(c respCommand) bool { return !open.Load() && isGuardedAcquire(c, name, owner) })
	holdsUndo := p.on(1, delayReply, 0, func(c respCommand) bool { return undoExpecting(c, name, owner, "1") && !settling(c) })
	grantsUndo := p.on(1, delayReply, 0, func(c respCommand) bool { return undoExpecting(c, name, owner, "2") && !settling(c) })
	_, err = l.TryAcquire(outer.Context(), actorlock.LeaseTime(10*time.Second))
	require.Error(t, err, "the re-entry's reply was lost, and its retries refused")
	await(t, first.ran, time.Second, "the re-entry, run by Redis")
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "the re-entry ran")
	await(t, refused.hits, 2*time.Second, "the re-entry's retry or settle, refused")
	endsLost(t, outer, 5*time.Second, "the outer hold did not end at its validity (no renewal confirmed)")
	select {
	case <-holdsUndo.ran:
		t.Logf("the lost hold's give-back ran while the re-entry was being settled: Redis %v", direct.HGetAll(ctx, name).Val())
	case <-time.After(1500 * time.Millisecond):
	}
	open.Store(true)
	await(t, grantsUndo.ran, 3*time.Second, "the settled re-entry's give-back, run by Redis")
	t.Logf("Redis holds %v (PTTL %v)", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	freedWithin(t, ctx, direct, name, 1500*time.Millisecond, "the lost hold is given back once Redis answers")
}

// RT25-2 (liveness: a lost hold left in Redis for an Extend's lease): a
// late Extend (its script extended the hold in Redis, its reply came after
// the hold's local validity) queues no give-back while the hold's own
// give-back is pending (RT23-3), leaving the extended hold to that one. But
// that give-back is retried only until its giveUpAt, now + the grants'
// lease (at least the watchdog's) + a call timeout, when the hold "would
// have expired anyway": not the Extend's lease, which Redis now holds. A
// give-back refused that long (BUSY, an unreachable Redis) gives up while
// the extended hold lives on, and nothing gives it back: the lock stays
// held by nobody for the Extend's lease once Redis answers again. (Before
// RT23-3 the Extend's own give-back, retried for the Extend's lease, did.)
// Here: a 1 s LeaseTime hold (watchdog 2 s) is extended to 20 s, its reply
// late; the hold's give-back meets BUSY for 4.5 s.
// docs/guarantees.md, "A lost hold is given back" ("released in Redis as soon as Redis answers").
func TestRedTeam25LateExtendLeftToAGiveBackThatGivesUpFirst(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithWatchdog(2*time.Second), actorlock.WithCallTimeout(2*time.Second))
	ctx := ctxFor(t, 40*time.Second)
	const name = "rt25-late-extend-gives-up"
	warm, err := rt.Lock("warm:extend").Acquire(ctx, actorlock.LeaseTime(2*time.Second))
	require.NoError(t, err)
	require.NoError(t, warm.Extend(ctx, 3*time.Second)) // the Extend script loaded
	require.NoError(t, warm.Unlock(ctx))
	l := rt.Lock(name)
	h, err := l.Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	owner := h.Owner()
	isExtend := func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && !guarded(keys) && len(keys) == 2 && keys[0] == name && len(argv) == 2 && argv[0] == "20000" && argv[1] == owner
	}
	slow := p.on(1, delayReply, time.Until(h.ValidUntil())+400*time.Millisecond, isExtend)
	var open atomic.Bool
	refused := p.on(100000, busy, 0, func(c respCommand) bool {
		return !open.Load() && isRelease(c, name, owner, true)
	})
	extended := make(chan error, 1)
	go func() { extended <- h.Extend(ctx, 20*time.Second) }()
	await(t, slow.ran, time.Second, "the Extend, run by Redis (its reply late)")
	endsLost(t, h, 3*time.Second, "the hold did not end at its LeaseTime")
	lostAt := time.Now()
	await(t, refused.hits, 2*time.Second, "the hold's give-back, answered BUSY")
	t.Logf("Extend: %v", await(t, extended, 3*time.Second, "the Extend's answer"))
	// The hold's give-back gives up at about lostAt + 2 s (watchdog) + 2 s
	// (call timeout); Redis answers again 1.5 s after that, with 13 s of the
	// Extend's lease left.
	time.Sleep(time.Until(lostAt.Add(5500 * time.Millisecond)))
	for len(refused.hits) > 0 {
		<-refused.hits
	}
	select {
	case <-refused.hits:
		t.Log("a give-back is still being retried")
	case <-time.After(500 * time.Millisecond):
		t.Log("no give-back is retried any more")
	}
	open.Store(true)
	t.Logf("Redis answers again; it holds %v (PTTL %v)", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	freedWithin(t, ctx, direct, name, 3*time.Second, "the extended lost hold is given back once Redis answers")
}
