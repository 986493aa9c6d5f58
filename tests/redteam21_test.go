package tests

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The twenty-first red-team pass, over 728288a (releaseStep.out/drained,
// drainMore, the Extend rule while a drain is queued, the own-id token rule,
// giveBackHold's newest read key, Handle.handBack, Batched's latest-deadline
// pipeline, Pop under the call timeout).

// RT21-1 (a lock held by nobody until its lease ends): Close's drain queues
// a release of every hold of ours (releaseAll, a releaseStep with no
// grant); when Redis refuses it once (BUSY: another client's script runs
// long; OOM, MISCONF, a refused dial alike), releaseFailed only answers it
// (s.grant == nil) and nothing runs it again. Close returns at once, and the
// lock stays in Redis for the rest of its lease: 20 s here, for ever as far
// as a LeaseTime of an hour goes. The same release after an owner actor's
// departure, and the one drainMore queues for a drained release found not
// run (RT18-3's fix), are dropped the same way. docs/guarantees.md,
// "Nothing is left behind": "A release that fails is retried by the runtime
// until it runs ... Close releases every hold".
func TestRedTeam21CloseReleaseRefusedOnceIsNeverRetried(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt21-close-release-busy"
	h, err := rt.Lock(name).Acquire(ctx, actorlock.LeaseTime(20*time.Second))
	require.NoError(t, err)
	owner := h.Owner()
	refused := p.on(1, busy, 0, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	cerr := rt.Close(cctx)
	t.Logf("Close after %v: %v", time.Since(start), cerr)
	await(t, refused.hits, time.Second, "Close's release, refused once (BUSY)")
	freedWithin(t, ctx, direct, name, 3*time.Second, "Close releases every hold, through a refusal that passes")
}

// RT21-2 (API: the call timeout). Batched.send now runs a pipeline under the
// latest deadline of the calls it carries (RT20-3's fix). A call that
// queued early rides with one that queued up to a call timeout later, and
// with a client that ends commands with their context
// (ContextTimeoutEnabled, where the runtime adds no call bound of its own)
// its caller waits for the pipeline until the later call's deadline: up to
// about twice the call timeout. Every flight is held 1.5 s (call timeout
// 2 s); a Semaphore.Release on b queues at once, another on c 1.3 s later;
// the first flight to land sends both in one pipeline, whose first command
// Redis is slow to take: the Release on b returns when c's deadline passes,
// about 3.3 s after it was called. options.go, WithCallTimeout: "bounds one
// Redis call of the runtime ... to within a twentieth of d (50 ms at most)
// more ... It holds with any client".
func TestRedTeam21PipelineRunsToItsLatestCallsDeadline(t *testing.T) {
	t.Parallel()
	const ct = 2 * time.Second
	const a, b, c = "rt21-latest-a", "rt21-latest-b", "rt21-latest-c"
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	rt := newRuntime(t, rdb, actorlock.WithCallTimeout(ct))
	ctx := ctxFor(t, 30*time.Second)
	for _, name := range []string{a, b, c} {
		require.NoError(t, rt.Semaphore(name).Release(ctx, 1)) // the script loaded, the server's clock learnt
	}
	landed := occupyFlights(t, ctx, p, rt, a, 1500*time.Millisecond)
	slow := p.on(1, holdCommand, 5*time.Second, func(cmd respCommand) bool { return cmd.scriptOn(b) })
	start := time.Now()
	released := make(chan error, 1)
	go func() { released <- rt.Semaphore(b).Release(ctx, 1) }()
	time.Sleep(1300 * time.Millisecond)
	go func() { _ = rt.Semaphore(c).Release(ctx, 1) }() // queues beside it, a call timeout later
	await(t, landed, 3*time.Second, "a flight landed")
	await(t, slow.hits, time.Second, "the Release on b, sent with the one on c")
	err := await(t, released, 15*time.Second, "the Release on b")
	took := time.Since(start)
	t.Logf("Release returned after %v: %v", took, err)
	require.Error(t, err, "Redis did not take its command")
	assert.Less(t, took, ct+500*time.Millisecond, "a call returns within the call timeout, with any client")
}

// RT21-4 (two holders): a give-back is not held back while a release of the
// same owner is being settled. undoStep.start never parks (only attempts
// and releases do: settlingFor), and undone, which moves a give-back's
// expectation by a release that ran, runs only once that release's outcome
// is known. So when a hold is abandoned while its Unlock is on its way and
// the Unlock's reply does not come (its settle not reaching Redis at
// once), the give-back of the whole hold (giveBackHold: every grant, the
// one being released too, while Redis counts what was last seen) runs
// between two settle tries, and the Unlock's own attempt, held back on its
// connection, lands after it, before its deadline and before any settle
// marked its guard: both release the same grant. One WithOwner id X:
// runtime 2 holds it (watchdog), runtime 1 re-enters it with a 1 s
// LeaseTime (count 2) and unlocks at once; the unlock's only attempt
// reaches Redis 1.3 s late (the call timeout is 1 s), its settles meet a
// reset connection until then. The hold's lease runs out while the unlock
// is out: the give-back (count 2, 1 hold) runs at once (count 1), then the
// unlock (count 0): the lock is deleted under runtime 2's valid hold, and
// a third runtime takes it. docs/design.md ("an owner's work is serial", a bullet)
// ("nothing releases for it" while a run of it is being settled);
// docs/guarantees.md, "A lost hold is given back" and "Exactly once".
func TestRedTeam21GiveBackRunsWhileAReleaseIsBeingSettled(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt21-giveback-while-settling", "owner-rt21-4"
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	h1, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "one owner id, a hold in each runtime")
	plain := func(c respCommand) bool { return isRelease(c, name, owner, false) }
	held := p.on(1, holdCommand, 1300*time.Millisecond, func(c respCommand) bool { return plain(c) && !settling(c) })
	var open atomic.Bool
	reset := p.on(1000, refuse, 0, func(c respCommand) bool { return !open.Load() && plain(c) && settling(c) })
	undos := p.on(10, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- h1.Unlock(ctx) }()
	await(t, held.hits, time.Second, "runtime 1's unlock, held back")
	await(t, held.ran, 3*time.Second, "runtime 1's unlock, run by Redis 1.3 s late")
	open.Store(true)
	t.Logf("Unlock: %v; settles reset: %d; give-backs run: %d; Redis %v", await(t, unlocked, 3*time.Second, "the Unlock"),
		len(reset.hits), len(undos.ran), direct.HGetAll(ctx, name).Val())
	time.Sleep(500 * time.Millisecond) // the settling, answered now
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}
