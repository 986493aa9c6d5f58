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

// The twenty-seventh red-team pass, over 51131bc..8b24be7 (Close's drain
// leaves an acquisition whose release is on its way to that release's
// outcome; lockActor.pending; keepDrains).

// RT27-1 (two holders): Close's drain leaves the holds of an acquisition
// whose Unlock is on its way to that release (drained), and queues no
// release of every hold for them until it turns out not to have run
// (drainMore). A late Extend that comes back meanwhile looks for Close's
// release (drainOf: releases of a departed owner, grant nil) and finds
// none, as the hold is gone from the actor: it queues its own
// compare-and-release of the extended hold. Then the drained release turns
// out not to have run, and drainMore queues Close's release of the same
// hold as well. The give-back runs first and deletes the hold; the owner id
// (WithOwner) is taken afresh by runtime 2; Close's release, refused once
// (BUSY) and run again before its giveUpAt, releases unconditionally and
// deletes runtime 2's hold under its live Held: another owner gets in.
// docs/guarantees.md, "Mutual exclusion on one Redis master".
func TestRedTeam27LateExtendBesideADrainedUnlock(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 40*time.Second)
	loadExtend(t, ctx, rt1)
	const name, owner = "rt27-late-extend-beside-drained-unlock", "owner-rt27-1"
	h, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(12*time.Second))
	require.NoError(t, err)

	// The Extend runs in Redis at once; its reply comes 2.5 s late.
	slow := p.on(1, delayReply, 2500*time.Millisecond, func(c respCommand) bool { return isExtendOf(c, name, owner, "20000") })
	// The Unlock's attempts and settles are refused unsent until
	// settleOK; then Close's release is answered BUSY until drainOK.
	var settleOK, drainOK atomic.Bool
	unsent := p.on(100000, refuse, 0, func(c respCommand) bool { return !settleOK.Load() && isRelease(c, name, owner, false) })
	drainBusy := p.on(100000, busy, 0, func(c respCommand) bool {
		return settleOK.Load() && !drainOK.Load() && !settling(c) && isRelease(c, name, owner, false)
	})
	undo := p.on(1, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) })

	extended := make(chan error, 1)
	go func() { extended <- h.Extend(ctx, 20*time.Second) }()
	await(t, slow.ran, 2*time.Second, "the Extend, run by Redis (its reply late)")
	unlocked := make(chan error, 1)
	go func() { unlocked <- h.Unlock(ctx) }()
	await(t, unsent.hits, 2*time.Second, "the Unlock's release, refused unsent")
	t.Logf("Unlock: %v", await(t, unlocked, 3*time.Second, "the Unlock (its outcome unknown)"))
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = rt1.Close(cctx)
	}()
	t.Logf("Extend: %v", await(t, extended, 4*time.Second, "the Extend's late answer"))
	time.Sleep(300 * time.Millisecond) // the late Extend's outcome applied
	settleOK.Store(true)               // the Unlock is settled: it did not run
	select {
	case <-undo.ran:
		t.Logf("the late Extend's give-back ran: Redis %v", direct.HGetAll(ctx, name).Val())
	case <-drainBusy.hits:
		// Close's release came first (the Extend gave nothing back).
		drainOK.Store(true)
		freedWithin(t, ctx, direct, name, 3*time.Second, "Close's release, once Redis answers")
		return
	case <-time.After(4 * time.Second):
		t.Fatalf("neither a give-back nor Close's release after the settle; Redis %v", direct.HGetAll(ctx, name).Val())
	}
	select {
	case <-drainBusy.hits:
		t.Log("Close's release of the same hold runs too (answered BUSY once)")
	case <-time.After(2 * time.Second):
		t.Log("no second release of the hold")
	}
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).TryAcquire(ctx)
	require.NoError(t, err, "the lock is free")
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2 holds the id afresh")
	drainOK.Store(true)
	time.Sleep(700 * time.Millisecond)
	t.Logf("Redis now %v", direct.HGetAll(ctx, name).Val())
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}

// RT27-2 (API: Done open, Err nil, while another owner holds the lock):
// an acquisition whose Unlock's release is being settled ends, before
// Close, at its hold's validity (expireHolds: outlived, then abandonHold at
// the uncut deadline), so that Done closes before Redis can let another
// owner in. Close's drain now leaves it to that release's outcome
// (releaseAll: drained) and drops the hold from the actor (drain:
// holds.del), so nothing ends it at its validity any more: while the
// settle is not answered (up to two call timeouts and the watchdog lease)
// its Done stays open and Err nil past ValidUntil, after Redis expired the
// hold and another runtime took the lock.
// docs/guarantees.md, "Loss is reported" ("Done() closes before Redis can let another owner in").
func TestRedTeam27DrainedUnlockKeepsDoneOpenPastItsValidity(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(time.Second))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 40*time.Second)
	const name = "rt27-drained-unlock-done-open"
	h, err := rt1.Lock(name).Acquire(ctx, actorlock.LeaseTime(2*time.Second))
	require.NoError(t, err)
	owner := h.Owner()
	var answer atomic.Bool
	unsent := p.on(100000, refuse, 0, func(c respCommand) bool { return !answer.Load() && isRelease(c, name, owner, false) })
	t.Cleanup(func() { answer.Store(true) })
	t.Logf("Unlock: %v", h.Unlock(ctx))
	await(t, unsent.hits, time.Second, "the Unlock's release, refused unsent")
	require.NoError(t, h.Err(), "the release is being settled")
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt1.Close(cctx)
	}()
	time.Sleep(time.Until(h.ValidUntil()) + 100*time.Millisecond)
	freedWithin(t, ctx, direct, name, 2*time.Second, "the unrenewed hold expires in Redis")
	h2, err := other.Lock(name).TryAcquire(ctx)
	require.NoError(t, err, "another runtime takes the lock")
	defer func() { _ = h2.Unlock(ctx) }()
	select {
	case <-h.Done():
		t.Logf("Done closed: %v", h.Err())
	default:
		t.Fatalf("another owner holds the lock (token %d) while this hold's Done is open (Err %v; valid until %s, %v ago)",
			h2.Token(), h.Err(), h.ValidUntil().Format("15:04:05.000"), time.Since(h.ValidUntil()).Round(time.Millisecond))
	}
}
