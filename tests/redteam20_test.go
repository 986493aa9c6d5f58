package tests

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The twentieth red-team pass, over a5a7b92 (releaseAll counting every
// grant with lessToDrain/drainOf, no Extend give-back while a drain is
// queued, giveBack's own-id token rule, giveBackHold's newest read key,
// Handle.handBack, Batched leaving the queue on its ctx, bounded Pop).

// guardOf is the guard key of a guarded script call (its last key).
func guardOf(c respCommand) string {
	keys, _, _ := c.script()
	return keys[len(keys)-1]
}

// RT20-1 (two holders): Close's drain now counts every grant of ours,
// those whose release is still being settled too, and relies on the
// settling's outcome to take that release's holds off the drain's
// (lessToDrain). When Close's ctx ends first, the actor's stop fires what
// is left, the drain's release included, with nobody to take anything off
// it: it releases the settled-to-be release's hold a second time. With a
// WithOwner id held through runtime 2 too, that is runtime 2's hold.
// Runtime 1 and runtime 2 each hold X (count 2); runtime 1 unlocks, the
// release runs (count 1), its reply is lost, its retry and settles are
// answered BUSY; runtime 1 closes with a 300 ms ctx; stop sends the
// drain's release of 1 hold (count 0): the lock is deleted under runtime
// 2's valid hold. (On 74089a6 the drain left out hold.releasing: nothing
// was sent.)
func TestRedTeam20CloseTimingOutReleasesASettlingReleaseTwice(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(500*time.Millisecond))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt20-close-timeout-settling", "owner-rt20-1"
	// Older lock actors, stopped after the name's (protoactor stops a
	// parent's children newest first, each on the closing goroutine, as
	// the runtime's dispatcher runs a message where it is posted): they
	// keep Close from cancelling the runtime's calls for a moment after
	// the name's actor fired what it had left.
	for i := range 300 {
		h, err := rt1.Lock(fmt.Sprintf("rt20-older-%d", i)).Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, h.Unlock(ctx))
	}
	h1, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "one owner id, a hold in each runtime")
	mine := func(c respCommand) bool { return isRelease(c, name, owner, false) }
	var guard atomic.Value
	guard.Store("")
	first := p.on(1, dropReply, 0, func(c respCommand) bool {
		if mine(c) {
			guard.Store(guardOf(c))
			return true
		}
		return false
	})
	// Every later attempt and settle of that one release is refused; any
	// other release passes.
	refused := p.on(100000, busy, 0, func(c respCommand) bool { return mine(c) && guardOf(c) == guard.Load().(string) })
	drains := p.on(10, delayReply, 0, func(c respCommand) bool { return mine(c) && guardOf(c) != guard.Load().(string) })
	uerr := h1.Unlock(ctx)
	t.Logf("Unlock: %v", uerr)
	require.Error(t, uerr, "the release's reply was lost")
	await(t, first.ran, time.Second, "runtime 1's release, run by Redis")
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 1's release ran: runtime 2's hold is left")
	await(t, refused.hits, 2*time.Second, "the release's settling, refused")
	cctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t.Logf("Close: %v", rt1.Close(cctx))
	select {
	case <-drains.ran:
		t.Logf("a second release of %s ran: Redis %v", owner, direct.HGetAll(ctx, name).Val())
	case <-time.After(time.Second):
	}
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}

// RT20-2 (two holders): the same double release without Close's ctx
// ending. Close's drain counts the grant whose release is being settled;
// only a settling that gets Redis's answer takes it off the drain's
// release (released -> lessToDrain). One that gives up (Redis did not
// answer it for as long as the release's guard is sure to live:
// releaseUnknown, "it may have acted") leaves the drain's count as it
// was, and the drain's release, unparked by that very give-up, runs at
// once: if the release had run, as here, it releases one hold more than
// runtime 1 has. Runtime 1 (a 2 s watchdog lease, so the settling gives
// up within 3 s) and runtime 2 each hold X (count 2); runtime 1's release
// runs (count 1) and its reply is lost; every retry and settle of it is
// answered BUSY; runtime 1 closes meanwhile (a 10 s ctx). The settling
// gives up, and the drain's release deletes the lock under runtime 2's
// valid hold. (On 74089a6 the drain left out hold.releasing: runtime 1's
// grant was not counted again.)
func TestRedTeam20CloseAfterAnUnknowableReleaseReleasesTwice(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(500*time.Millisecond), actorlock.WithWatchdog(2*time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt20-close-unknowable-release", "owner-rt20-2"
	h1, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "one owner id, a hold in each runtime")
	mine := func(c respCommand) bool { return isRelease(c, name, owner, false) }
	var guard atomic.Value
	guard.Store("")
	first := p.on(1, dropReply, 0, func(c respCommand) bool {
		if mine(c) {
			guard.Store(guardOf(c))
			return true
		}
		return false
	})
	refused := p.on(100000, busy, 0, func(c respCommand) bool { return mine(c) && guardOf(c) == guard.Load().(string) })
	drains := p.on(10, delayReply, 0, func(c respCommand) bool { return mine(c) && guardOf(c) != guard.Load().(string) })
	uerr := h1.Unlock(ctx)
	t.Logf("Unlock: %v", uerr)
	require.Error(t, uerr, "the release's reply was lost")
	await(t, first.ran, time.Second, "runtime 1's release, run by Redis")
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 1's release ran: runtime 2's hold is left")
	await(t, refused.hits, 2*time.Second, "the release's settling, refused")
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	cerr := rt1.Close(cctx)
	t.Logf("Close after %v: %v", time.Since(t0), cerr)
	select {
	case <-drains.ran:
		t.Logf("a second release of %s ran: Redis %v", owner, direct.HGetAll(ctx, name).Val())
	case <-time.After(500 * time.Millisecond):
	}
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}

// RT20-3 (liveness, API: the call timeout): scripts.Batched now lets a
// queued call leave the queue when its ctx ends, but a call that queued
// and then left with a batch before its ctx ended (it sends the batch, or
// rides in it) is sent under context.WithoutCancel (Batched.send), so its
// deadline no longer bounds it: with a client that ends calls with their
// context (ContextTimeoutEnabled, where the runtime adds no call bound of
// its own), its caller waits for the whole pipeline, as long as the
// client's read timeout (3 s by default; for ever with ReadTimeout -1).
// Every flight is held 600 ms; a Semaphore.Release with a call timeout of
// 1 s queues, leaves alone when the first flight lands, and Redis is slow
// to take its command (4 s): it returns after about 3.6 s, not within the
// call timeout. (options.go, WithCallTimeout: "It holds with any client";
// RT19-2's fix covers only a call still queued when its ctx ends.)
func TestRedTeam20QueuedCallSentBeforeItsCtxEndedOutlivesIt(t *testing.T) {
	t.Parallel()
	const ct = time.Second
	const a, b = "rt20-cte-a", "rt20-cte-b"
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	rt := newRuntime(t, rdb, actorlock.WithCallTimeout(ct))
	ctx := ctxFor(t, 30*time.Second)
	for _, name := range []string{a, b} {
		require.NoError(t, rt.Semaphore(name).Release(ctx, 1)) // the script loaded, the server's clock learnt
	}
	landed := occupyFlights(t, ctx, p, rt, a, 600*time.Millisecond)
	slow := p.on(1, holdCommand, 4*time.Second, func(cmd respCommand) bool { return cmd.scriptOn(b) })
	start := time.Now()
	released := make(chan error, 1)
	go func() { released <- rt.Semaphore(b).Release(ctx, 1) }()
	await(t, landed, 2*time.Second, "a flight landed")
	await(t, slow.hits, time.Second, "the Release, sent when a flight landed")
	err := await(t, released, 10*time.Second, "the Release")
	took := time.Since(start)
	t.Logf("Release returned after %v: %v", took, err)
	assert.Less(t, took, ct+500*time.Millisecond, "a call returns within the call timeout, with any client")
}
