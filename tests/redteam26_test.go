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

// The twenty-sixth red-team pass, over 51131bc..b56db42 (give-backs in
// runsBefore's order, parked while an attempt of their owner is settled;
// Close's drain carrying its holds' validity as Guard.Until, drainMore;
// extendUndos; futures refused).

// isExtendOf reports whether c is the Extend script of owner's hold of
// lock name to lease ms.
func isExtendOf(c respCommand, name, owner, leaseMs string) bool {
	keys, argv, ok := c.script()
	return ok && !guarded(keys) && len(keys) == 2 && keys[0] == name && len(argv) == 2 && argv[0] == leaseMs && argv[1] == owner
}

// loadExtend runs the Extend script once, so that a rule aimed at it
// meets the call itself.
func loadExtend(t *testing.T, ctx context.Context, rt *actorlock.Runtime) {
	t.Helper()
	warm, err := rt.Lock("warm:extend").Acquire(ctx, actorlock.LeaseTime(2*time.Second))
	require.NoError(t, err)
	require.NoError(t, warm.Extend(ctx, 3*time.Second))
	require.NoError(t, warm.Unlock(ctx))
}

// RT26-1 (two holders): a late Extend gives nothing back "unless a drain
// (Close) releases them already" (RT18-7), but drainOf looks for that
// drain only in steps and parked. Since RT21-1 a drain refused once
// (BUSY, a refused dial) waits on a timer to run again (a.later), and
// while it waits or is in flight drainOf misses it: the late Extend queues
// its compare-and-release as well. That give-back runs first and deletes
// the hold; runtime 2 takes the WithOwner id afresh; the drain, still
// before its holds' validity (giveUpAt), then runs again, unconditional,
// and deletes runtime 2's hold under its live Held: another owner gets
// the lock.
// docs/guarantees.md, "Mutual exclusion on one Redis master".
func TestRedTeam26LateExtendGivesBackBesideARetriedDrain(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(2*time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	loadExtend(t, ctx, rt1)
	const name, owner = "rt26-late-extend-beside-drain", "owner-rt26-1"
	h, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(6*time.Second))
	require.NoError(t, err)
	slow := p.on(1, delayReply, time.Second, func(c respCommand) bool { return isExtendOf(c, name, owner, "20000") })
	var open atomic.Bool
	refused := p.on(100000, busy, 0, func(c respCommand) bool { return !open.Load() && isRelease(c, name, owner, false) })
	undo := p.on(1, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) })
	extended := make(chan error, 1)
	go func() { extended <- h.Extend(ctx, 20*time.Second) }()
	await(t, slow.hits, time.Second, "the Extend, sent")
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt1.Close(cctx)
	}()
	await(t, refused.hits, 2*time.Second, "Close's release, refused (BUSY)")
	t.Logf("Extend: %v", await(t, extended, 3*time.Second, "the Extend's answer (Close ends its wait)"))
	await(t, slow.ran, 2*time.Second, "the Extend, run by Redis (its reply late)")
	select {
	case <-undo.ran:
		t.Logf("the late Extend's give-back ran beside Close's release; Redis %v", direct.HGetAll(ctx, name).Val())
	case <-time.After(1500 * time.Millisecond):
	}
	if direct.Exists(ctx, name).Val() == 1 {
		// Runtime 1's hold is still there: the drain releases it, once
		// Redis answers, before its validity.
		open.Store(true)
		freedWithin(t, ctx, direct, name, 2*time.Second, "Close's release, once Redis answers")
		return
	}
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).TryAcquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2 holds the id afresh")
	open.Store(true) // Redis takes commands again, long before runtime 1's holds' validity
	time.Sleep(700 * time.Millisecond)
	t.Logf("Redis now %v", direct.HGetAll(ctx, name).Val())
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}
