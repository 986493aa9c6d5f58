package tests

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The twenty-fourth red-team pass, over 5be3fbd..dc33e82 (newerUndo and
// lockActor.undos: give-backs of one owner run newest first; a stopping
// actor runs them newest first; RT23-1..3).

// undoExpecting reports whether c is a give-back (compare-and-release) of
// lock name by owner expecting ifCount holds.
func undoExpecting(c respCommand, name, owner, ifCount string) bool {
	_, argv, _ := c.script()
	return isRelease(c, name, owner, true) && argv[3] == ifCount
}

// RT24-1 (liveness: a lost hold left in Redis for a lease): give-backs run
// newest *queued* first (giveBack: first; newerUndo), on the premise that
// each is "queued on a newer sight of the owner's count". A lost hold's
// give-back (abandonHold → giveBackHold) is not: it expects h.count, the
// count as this runtime holds it, which leaves out a late grant whose own
// give-back (giveBackGrant) is still out, refused once and waiting to be
// retried. So the hold's give-back, queued later, runs first: it meets the
// late grant's hold still counted (2, expecting 1), is refused by count
// and dropped (nothing newer is pending); the late grant's give-back then
// runs and releases its one hold; the lost hold stays in Redis, nobody's,
// for the lease a late renewal gave it (up to a watchdog lease; the order
// the give-backs were queued in is not the order of their sights). Here:
// the owner holds (watchdog 3 s) and re-enters with a 1 s LeaseTime whose
// reply comes 1.5 s late (given back: count 2); that give-back meets BUSY
// until the outer hold is lost (every renewal from then on runs in Redis
// with its reply 3.5 s late), then goes through.
// docs/guarantees.md, "A lost hold is given back" ("released in Redis as
// soon as Redis answers").
func TestRedTeam24LostHoldsGiveBackQueuedAfterALateGrantsIsDropped(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithWatchdog(3*time.Second), actorlock.WithCallTimeout(3*time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt24-lost-hold-after-late-grant"
	l := rt.Lock(name)
	outer, err := l.Acquire(ctx)
	require.NoError(t, err)
	owner := outer.Owner()
	// One renewal runs as usual (its script loaded), then every renewal
	// runs in Redis with its reply after the hold's validity.
	time.Sleep(1200 * time.Millisecond)
	require.NoError(t, outer.Err())
	p.on(100000, delayReply, 3500*time.Millisecond, func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && len(keys) == 1 && keys[0] == name && len(argv) == 2 && argv[1] == owner
	})
	late := p.on(1, delayReply, 2500*time.Millisecond, func(c respCommand) bool {
		return isAcquireOn(c, name, owner) && !settling(c)
	})
	busyGrant := p.on(100000, busy, 0, func(c respCommand) bool { return undoExpecting(c, name, owner, "2") })
	holdsUndo := p.on(1, delayReply, 0, func(c respCommand) bool { return undoExpecting(c, name, owner, "1") })
	go func() {
		if h, err := l.TryAcquire(outer.Context(), actorlock.LeaseTime(2*time.Second)); err == nil {
			_ = h.Unlock(ctx)
		}
	}()
	await(t, late.ran, 2*time.Second, "the re-entry, run by Redis (its reply late)")
	await(t, busyGrant.hits, 4*time.Second, "the late grant's give-back, refused (BUSY)")
	require.NoError(t, outer.Err(), "the late grant's give-back is out before the outer hold is lost")
	endsLost(t, outer, 5*time.Second, "the outer hold did not end at its validity (no renewal confirmed)")
	// Before the fix the lost hold's give-back ran at once, met the late
	// grant's hold still counted and was dropped; now it waits for the
	// late grant's give-back, which expects more holds.
	select {
	case c := <-holdsUndo.ran:
		t.Logf("the lost hold's give-back ran while the late grant's was refused: it met %v (%v)", direct.HGetAll(ctx, name).Val(), c[3:])
	case <-time.After(time.Second):
	}
	p.stop(busyGrant)
	t.Logf("Redis holds %v (PTTL %v)", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	freedWithin(t, ctx, direct, name, time.Second, "the lost hold is given back once Redis answers")
}

// RT24-S1 (suspected in pass 24, reproduced after): Close's release of an
// owner's holds runs only before the validity they had when it was queued
// (releaseStep.giveUpAt). A write release on its way (being settled) had
// cut that validity to what it leaves (a read under the write, whose key
// expires sooner). When that release turned out not to have run, its
// write hold came back to Close's release with the cut validity, long
// past, and was never released: the write lock stayed for its lease. It
// now comes back with the validity it had before the cut.
// docs/guarantees.md, "Nothing is left behind" ("Close releases every hold")
func TestRedTeam24CloseReleasesAWriteWhoseReleaseDidNotRun(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(time.Second), actorlock.WithWatchdog(10*time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt24-close-write-release-not-run"
	rw := rt.ReadWriteLock(name)
	w, err := rw.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	_, err = rw.ReadLocker().Acquire(w.Context(), actorlock.LeaseTime(time.Second)) // a read under the write
	require.NoError(t, err)
	var open atomic.Bool
	// The release, its settles, and Close's release: the guarded scripts
	// (renewals are not).
	refused := p.on(100000, refuse, 0, func(c respCommand) bool {
		keys, _, ok := c.script()
		return !open.Load() && ok && keys[0] == name && guarded(keys)
	})
	unlocked := make(chan error, 1)
	go func() { unlocked <- w.Unlock(ctx) }()
	await(t, refused.hits, 2*time.Second, "the write's release, refused on its way")
	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		closed <- rt.Close(cctx)
	}()
	time.Sleep(1500 * time.Millisecond) // past the read's 1 s lease, the validity the release cut the hold to
	t.Logf("before opening: Redis %v PTTL %v", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	open.Store(true)
	t.Logf("Unlock: %v", await(t, unlocked, 5*time.Second, "the write's Unlock"))
	t.Logf("after: Redis %v PTTL %v", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	freedWithin(t, ctx, direct, name, 5*time.Second, "Close releases the write, its release having turned out not to run (watchdog lease 10 s)")
	require.NoError(t, await(t, closed, 10*time.Second, "Close"))
}
