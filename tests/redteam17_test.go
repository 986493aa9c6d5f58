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

// The seventeenth red-team pass, over da188e4 (giveBackUnknown for
// re-entries of WithOwner ids, undoStep.readTokens, giveBack returning its
// undo). RT17-1 and RT17-2 are new with 2cd90a7 (they pass on ee4c7dd);
// RT17-3, RT17-4 and RT17-5 are older. Every one is two holders.

// mineGuarded matches runtime 1's guarded scripts (attempts, settles,
// releases, give-backs) on lock name by owner, not its renewals.
func mineGuarded(name, owner string) func(respCommand) bool {
	return func(c respCommand) bool {
		keys, _, ok := c.script()
		return ok && guarded(keys) && c.scriptOn(name, owner)
	}
}

// RT17-1 (two holders): a WithOwner re-entry whose outcome could not be
// learnt is now given back by count alone (giveBackUnknown: ifCount > 1,
// token 0), and giveBack hands a newer give-back's token to the older
// queued give-backs of the owner (exclusive kinds): the outer hold's
// give-back, queued by abandonHold just before, loses its token T1 and
// becomes a count-only give-back expecting count 1. Once the old hold has
// expired and runtime 2 (the same owner id: a restarted process) takes the
// lock afresh (count 1), the outer give-back, still retried for the
// watchdog lease, finds count 1 and deletes runtime 2's hold: another owner
// gets in while runtime 2's hold is valid. Before da188e4/2cd90a7 the
// unknown re-entry left the outer give-back its token, which a fresh grant
// moves, and the give-back was refused.
func TestRedTeam17UnknownReentryStripsTheOuterGiveBacksToken(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(500*time.Millisecond))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt17-unknown-reentry-token", "owner-rt17-1"
	l := rt1.Lock(name, actorlock.WithOwner(owner))
	// The outer hold outlives the re-entry's settling (2 s), so the
	// settling's end abandons it and queues its give-back right there.
	old, err := l.Acquire(ctx, actorlock.LeaseTime(4*time.Second))
	require.NoError(t, err)
	mine := mineGuarded(name, owner)
	first := p.on(1, dropReply, 0, mine)
	var open atomic.Bool
	p.on(100000, busy, 0, func(c respCommand) bool { return !open.Load() && mine(c) })
	_, err = l.Acquire(old.Context(), actorlock.LeaseTime(time.Second))
	require.Error(t, err, "the re-entry's reply was lost")
	await(t, first.ran, time.Second, "the re-entry, run by Redis")
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "the re-entry ran")
	endsLost(t, old, 4*time.Second, "the outer hold ends once the re-entry's outcome is found unknowable")
	require.Eventually(t, func() bool { return direct.Exists(ctx, name).Val() == 0 }, 5*time.Second, 5*time.Millisecond,
		"the old hold expires at its lease while its give-back is refused")
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err, "runtime 2 once the old hold expired")
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "a fresh hold, not a re-entry")
	tries := p.on(1, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) && !settling(c) })
	open.Store(true)
	select {
	case <-tries.ran:
		time.Sleep(200 * time.Millisecond) // the rest of the give-backs
	case <-time.After(2 * time.Second):
	}
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	require.NoError(t, h2.Unlock(ctx))
}

// RT17-2 (two holders): giveBackUnknown now gives back a WithOwner id's
// re-entry of unknown outcome by count alone (ifCount = the count the
// re-entry would have made, 2; token 0), on the ground that a fresh hold
// of another runtime does not count that many. It does once it re-entered.
// Runtime 1 (owner id X) reads, re-enters (its reply lost, every later
// call of runtime 1 answered BUSY until the settling gives up); the lock
// expires; runtime 2 (the same id: a restarted process) reads afresh and
// re-enters: count 2, as the give-back expects. Redis answers runtime 1
// again, and its give-back, retried for the re-entry's lease, releases
// runtime 2's newest read. Runtime 2 believes it holds two reads; Redis
// counts one, so its inner Unlock deletes the lock while its outer read
// is valid, and a writer gets in.
func TestRedTeam17UnknownReentryGiveBackReleasesAFreshReentry(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	direct := client(t, srv.Addr)
	rt1 := newRuntime(t, client(t, p.Addr()), actorlock.WithCallTimeout(500*time.Millisecond))
	warmScripts(t, rt1)
	p2 := startRESPProxy(t, srv.Addr)
	rt2 := newRuntime(t, client(t, p2.Addr()))
	warmScripts(t, rt2)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt17-unknown-reentry-fresh", "owner-rt17-2"
	rd1 := rt1.ReadWriteLock(name, actorlock.WithOwner(owner)).ReadLocker()
	old, err := rd1.Acquire(ctx, actorlock.LeaseTime(3*time.Second))
	require.NoError(t, err)
	mine := mineGuarded(name, owner)
	first := p.on(1, dropReply, 0, mine)
	var open atomic.Bool
	p.on(100000, busy, 0, func(c respCommand) bool { return !open.Load() && mine(c) })
	_, err = rd1.Acquire(old.Context(), actorlock.LeaseTime(2*time.Second))
	require.Error(t, err, "the re-entry's reply was lost")
	await(t, first.ran, time.Second, "the re-entry, run by Redis")
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "the re-entry ran")
	endsLost(t, old, 5*time.Second, "the outer read ends")
	require.Eventually(t, func() bool { return direct.Exists(ctx, name).Val() == 0 }, 5*time.Second, 5*time.Millisecond,
		"runtime 1's reads expire while its give-backs are refused")
	rd2 := rt2.ReadWriteLock(name, actorlock.WithOwner(owner)).ReadLocker()
	outer, err := rd2.Acquire(ctx)
	require.NoError(t, err, "runtime 2 once runtime 1's reads expired")
	inner, err := rd2.Acquire(outer.Context())
	require.NoError(t, err, "runtime 2 re-enters")
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "runtime 2's own two reads")
	tries := p.on(1, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) && !settling(c) })
	open.Store(true)
	select {
	case <-tries.ran:
		time.Sleep(300 * time.Millisecond) // the rest of the give-backs
	case <-time.After(2 * time.Second):
	}
	assert.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "runtime 2's two reads are left in Redis")
	// Runtime 2's inner Unlock runs; its reply is held back a second.
	slow := p2.on(1, delayReply, time.Second, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- inner.Unlock(ctx) }()
	await(t, slow.ran, 2*time.Second, "runtime 2's inner Unlock, run by Redis")
	othersTry(t, ctx, other.ReadWriteLock(name).WriteLocker(), outer, "a writer while runtime 2's outer read is held")
	t.Logf("inner Unlock: %v", await(t, unlocked, 3*time.Second, "runtime 2's inner Unlock"))
	require.NoError(t, outer.Err(), "runtime 2's outer read, never unlocked, is held")
	_ = outer.Unlock(ctx)
}

// RT17-3 (two holders): Close's drain releases "our grants only, but for a
// release in flight, which releases its own" (releaseAll: granted(...,
// a.inflight)), but a release whose reply was lost is not in flight while
// it is being settled: a.inflight is its settleStep, or nothing between
// settle tries. Its grant is counted again, and the drain's release
// (holds n, no count check) runs once the settling says the first release
// ran. With a WithOwner id held through another runtime too, the second
// release takes that runtime's hold: runtime 1 and runtime 2 each hold
// owner X once (count 2); runtime 1 unlocks, the release runs (count 1),
// its reply is lost and its settling refused (BUSY) while runtime 1
// closes; the settling then finds the release done, and the drain releases
// one hold more: runtime 2's, which is valid, and another owner gets in.
func TestRedTeam17CloseReleasesAGrantWhoseReleaseIsBeingSettled(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(500*time.Millisecond))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt17-close-settling-release", "owner-rt17-3"
	h1, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "one owner id, a hold in each runtime")
	mine := func(c respCommand) bool { return isRelease(c, name, owner, false) }
	first := p.on(1, dropReply, 0, mine)
	var open atomic.Bool
	refused := p.on(100000, busy, 0, func(c respCommand) bool { return !open.Load() && mine(c) })
	t0 := time.Now()
	uerr := h1.Unlock(ctx)
	t.Logf("Unlock after %v: %v", time.Since(t0), uerr)
	require.Error(t, uerr, "the release's reply was lost")
	await(t, first.ran, time.Second, "runtime 1's release, run by Redis")
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 1's release ran: runtime 2's hold is left")
	await(t, refused.hits, 2*time.Second, "the release's settling, refused")
	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed <- rt1.Close(cctx)
	}()
	time.Sleep(200 * time.Millisecond) // the drain begins while the settling is refused
	open.Store(true)
	t.Logf("Close: %v", await(t, closed, 10*time.Second, "runtime 1's Close"))
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}

// RT17-5 (two holders): an Extend whose reply comes after its hold ended
// gives back what the hold counted when the Extend was sent (extended:
// giveBack(owner, false, d.count, d.count, d.token, ...)): every hold
// Redis counted for the owner, not this runtime's grants. With a WithOwner
// id held through another runtime too, that is the other runtime's hold as
// well. Runtime 2 holds owner X (watchdog); runtime 1 holds X with a 1 s
// LeaseTime (count 2) and extends it; the extension runs, its reply comes
// after runtime 1's hold ran out locally, whose own give-back (1 hold,
// while count 2) is answered BUSY meanwhile. The Extend's give-back (2
// holds, while count 2 and the counter holds runtime 1's token) then
// deletes the lock under runtime 2's valid hold.
func TestRedTeam17LateExtendGivesBackAnotherRuntimesHold(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(2*time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt17-late-extend", "owner-rt17-5"
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	h1, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "one owner id, a hold in each runtime")
	isExtend := func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && !guarded(keys) && len(keys) == 2 && keys[0] == name && len(argv) == 2 && argv[1] == owner
	}
	slow := p.on(1, delayReply, time.Until(h1.ValidUntil())+300*time.Millisecond, isExtend)
	var open atomic.Bool
	refused := p.on(100000, busy, 0, func(c respCommand) bool {
		_, argv, _ := c.script()
		return !open.Load() && isRelease(c, name, owner, true) && argv[1] == "1"
	})
	whole := p.on(1, delayReply, 0, func(c respCommand) bool {
		_, argv, _ := c.script()
		return isRelease(c, name, owner, true) && argv[1] == "2" && !settling(c)
	})
	extended := make(chan error, 1)
	go func() { extended <- h1.Extend(ctx, 5*time.Second) }()
	await(t, slow.ran, time.Second, "runtime 1's Extend, run by Redis")
	endsLost(t, h1, 2*time.Second, "runtime 1's hold ends at its LeaseTime")
	await(t, refused.hits, time.Second, "runtime 1's own give-back, answered BUSY")
	t.Logf("Extend: %v", await(t, extended, 3*time.Second, "the Extend"))
	select {
	case <-whole.ran:
		t.Logf("a give-back of both holds ran: Redis %v", direct.HGetAll(ctx, name).Val())
	case <-time.After(2 * time.Second):
	}
	open.Store(true)
	time.Sleep(300 * time.Millisecond) // runtime 1's own give-back
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}

// Found while fixing pass 17 (its "suspected" list): a read give-back of
// a hold whose owner id also reads through another runtime went out
// unchecked (token 0: this runtime did not know every read-hold key), so,
// retried for its lease, it matched a fresh hold of the id that counted as
// many. Runtime 2 reads X (key 1), runtime 1 reads X (key 2), both for
// 1 s; runtime 1's read ends at its lease and its give-back (1 hold, while
// X counts 2) is answered BUSY until both keys have expired; runtime 2
// reads X afresh and re-enters: count 2. The give-back now checks that the
// newest key is runtime 1's, and is refused; before, it released runtime
// 2's newest read, and runtime 2's inner Unlock then freed the lock under
// its outer read.
func TestRedTeam17ReadGiveBackNotKnowingEveryKeySparesAFreshReentry(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	direct := client(t, srv.Addr)
	rt1 := newRuntime(t, client(t, p.Addr()), actorlock.WithCallTimeout(500*time.Millisecond))
	warmScripts(t, rt1)
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt17-read-give-back-unknowing", "owner-rt17-6"
	_, err := rt2.ReadWriteLock(name, actorlock.WithOwner(owner)).ReadLocker().Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	var open atomic.Bool
	refused := p.on(100000, busy, 0, func(c respCommand) bool { return !open.Load() && isRelease(c, name, owner, true) })
	mine, err := rt1.ReadWriteLock(name, actorlock.WithOwner(owner)).ReadLocker().Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "one owner id, a read in each runtime")
	endsLost(t, mine, 3*time.Second, "runtime 1's read ends at its lease")
	await(t, refused.hits, 2*time.Second, "runtime 1's give-back, answered BUSY")
	require.Eventually(t, func() bool { return direct.Exists(ctx, name).Val() == 0 }, 5*time.Second, 5*time.Millisecond,
		"both reads expire while the give-back is refused")
	rd2 := rt2.ReadWriteLock(name, actorlock.WithOwner(owner)).ReadLocker()
	outer, err := rd2.Acquire(ctx)
	require.NoError(t, err, "runtime 2 reads afresh")
	inner, err := rd2.Acquire(outer.Context())
	require.NoError(t, err, "and re-enters")
	require.Equal(t, "2", direct.HGet(ctx, name, owner).Val())
	tries := p.on(1, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) && !settling(c) })
	open.Store(true)
	select {
	case <-tries.ran:
		time.Sleep(300 * time.Millisecond) // the rest of the give-backs
	case <-time.After(2 * time.Second):
	}
	assert.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "runtime 2's two reads are left in Redis")
	require.NoError(t, inner.Unlock(ctx))
	othersTry(t, ctx, other.ReadWriteLock(name).WriteLocker(), outer, "a writer while runtime 2's outer read is held")
	require.NoError(t, outer.Err(), "runtime 2's outer read, never unlocked, is held")
	require.NoError(t, outer.Unlock(ctx))
}
