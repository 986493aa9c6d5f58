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

// Regression tests of issue 31's defects A-F and probes of its five
// suspicions, each on real redis-server processes with the RESP proxy
// putting its fault on the command it is aimed at. Each states the promise
// (docs/guarantees.md) and fails while the defect is there.
//
// Two holders are judged as the simulation judges them: when a hold B is
// granted, every other live hold A of the name must have a validity
// deadline (Held.ValidUntil) no later than B's grant. A fencing token is the
// Redis server's clock in µs at the grant (scripts/reentrant.lua,
// next_token), and that server runs on this machine: time.UnixMicro(token)
// is the grant's moment on the test's clock.

// grantTime is when hold h was granted, on this machine's clock.
func grantTime(h *actorlock.Held) time.Time { return time.UnixMicro(h.Token()) }

// requireNotBoth fails when b was granted while a was still valid: a's
// Done open or its validity deadline after b's grant.
func requireNotBoth(t *testing.T, a, b *actorlock.Held, what string) {
	t.Helper()
	at := grantTime(b)
	if until := a.ValidUntil(); until.After(at) {
		t.Fatalf("%s: two holders: token %d was granted at %s while token %d (owner %s, Err %v) was valid until %s (%v later)",
			what, b.Token(), at.Format("15:04:05.000000"), a.Token(), a.Owner(), a.Err(), until.Format("15:04:05.000000"), until.Sub(at))
	}
}

// holdTwice acquires l, then re-enters it: one owner, two holds.
func holdTwice(t *testing.T, ctx context.Context, l *actorlock.Lock, rdb *redis.Client) (outer, inner *actorlock.Held) {
	t.Helper()
	outer, err := l.Acquire(ctx)
	require.NoError(t, err)
	inner, err = l.Acquire(outer.Context())
	require.NoError(t, err)
	require.Equal(t, "2", rdb.HGet(ctx, l.Name(), outer.Owner()).Val(), "a re-entry: two holds of one owner")
	return outer, inner
}

// downgraded takes rw's write, then a read under it with a LeaseTime of
// lease (a downgrade), and returns both and a time after the read's
// acquisition was sent.
func downgraded(t *testing.T, ctx context.Context, rw *actorlock.ReadWriteLock, lease time.Duration) (w, r *actorlock.Held, readBy time.Time) {
	t.Helper()
	w, err := rw.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	r, err = rw.ReadLocker().Acquire(w.Context(), actorlock.LeaseTime(lease))
	require.NoError(t, err)
	return w, r, time.Now()
}

// othersTry has another owner try for l once, and fails if it gets the
// lock while held is valid.
func othersTry(t *testing.T, ctx context.Context, l *actorlock.Lock, held *actorlock.Held, what string) {
	t.Helper()
	if h, err := l.TryAcquire(ctx); err == nil {
		requireNotBoth(t, held, h, what)
		require.NoError(t, h.Unlock(ctx))
	}
}

// freedWithin requires name to leave Redis within d of now, and says what
// Redis still holds if it does not.
func freedWithin(t *testing.T, ctx context.Context, rdb *redis.Client, name string, d time.Duration, what string) {
	t.Helper()
	from := time.Now()
	for rdb.Exists(ctx, name).Val() != 0 {
		if time.Since(from) > d {
			t.Fatalf("%s: %v later Redis still holds %v (PTTL %v)", what, time.Since(from).Round(time.Millisecond), rdb.HGetAll(ctx, name).Val(), rdb.PTTL(ctx, name).Val())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// isAcquireOn reports whether c is an acquire script of lock name (no
// unlock latch among its keys) naming owner.
func isAcquireOn(c respCommand, name, owner string) bool {
	keys, _, ok := c.script()
	if !ok || keys[0] != name || !c.scriptOn(name, owner) {
		return false
	}
	for _, k := range keys {
		if len(k) > len("redisson_unlock_latch:") && k[:len("redisson_unlock_latch:")] == "redisson_unlock_latch:" {
			return false
		}
	}
	return true
}

// A: a release's first attempt that reaches Redis after its own retry must
// not release again. The owner holds twice; the inner Unlock's first
// attempt is held back 3 s while the client's 300 ms read timeout makes the
// runtime retry it on another connection, which releases the inner hold.
// The late first attempt then finds one hold left, the outer one: it must
// leave it ("a lock script never takes effect twice for one request").
func TestLateReleaseAttemptDoesNotReleaseTwice(t *testing.T) {
	t.Parallel()
	p, direct, rt := impatient(t)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name = "late-release"
	outer, inner := holdTwice(t, ctx, rt.Lock(name), direct)

	held := p.on(1, holdCommand, 3*time.Second, func(c respCommand) bool { return isRelease(c, name, inner.Owner(), false) })
	require.NoError(t, inner.Unlock(ctx), "the retry released the inner hold")
	await(t, held.hits, time.Second, "the inner release's first attempt")
	assert.Equal(t, "1", direct.HGet(ctx, name, outer.Owner()).Val(), "the retry released one hold")
	await(t, held.ran, 5*time.Second, "the first attempt, run by Redis after its retry")
	othersTry(t, ctx, other.Lock(name), outer, "after the inner release's late first attempt")
	assert.Equal(t, "1", direct.HGet(ctx, name, outer.Owner()).Val(), "the late first attempt released nothing more")
	require.NoError(t, outer.Err(), "the outer hold, never unlocked, is held")
	require.NoError(t, outer.Unlock(ctx))
	emptied(t, ctx, direct, name, "one Unlock per acquisition frees the lock")
}

// B: a read taken with a short LeaseTime under its owner's write (a
// downgrade) is valid only as long as its read-hold key once the write is
// unlocked: after that key expires, any reader's release deletes the lock,
// and a writer gets in. Its validity must follow the key, so that Done
// closes before Redis can let that writer in.
func TestDowngradedReadIsValidOnlyAsLongAsItsKey(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	other := newRuntime(t, rdb)
	ctx := ctxFor(t, 30*time.Second)
	const name, lease = "downgrade-short-read", time.Second
	w, r, readBy := downgraded(t, ctx, rt.ReadWriteLock(name), lease)
	require.NoError(t, w.Unlock(ctx))
	require.NoError(t, r.Err(), "the read is held")
	assert.False(t, r.ValidUntil().After(readBy.Add(lease)),
		"the read alone keeps the lock now, for its key's lease: valid until %v, not %v", readBy.Add(lease).Format("15:04:05.000"), r.ValidUntil().Format("15:04:05.000"))

	key := fmt.Sprintf("{%s}:%s:rwlock_timeout:1", name, r.Owner())
	require.Eventually(t, func() bool { return rdb.Exists(ctx, key).Val() == 0 }, 5*time.Second, 10*time.Millisecond, "the read-hold key expires")
	// Another process reads and releases: with no live read-hold key left,
	// its release deletes the lock (Redisson's rule); then a writer.
	o, err := other.ReadWriteLock(name).ReadLocker().Acquire(ctx, actorlock.WaitTime(5*time.Second))
	require.NoError(t, err)
	require.NoError(t, o.Unlock(ctx))
	if wh, err := other.ReadWriteLock(name).WriteLocker().TryAcquire(ctx); err == nil {
		requireNotBoth(t, r, wh, "a writer after the downgraded read's key expired")
		require.NoError(t, wh.Unlock(ctx))
	}
	select {
	case <-r.Done():
		assert.ErrorIs(t, r.Err(), actorlock.ErrLost)
	case <-time.After(time.Second):
		t.Fatalf("the read's Done is still open %v after its lease (valid until %v)", time.Since(readBy.Add(lease)), r.ValidUntil().Format("15:04:05.000"))
	}
}

// C: a give-back must not delete a grant that was in flight when it was
// queued. Owner X (WithOwner) holds with a 1 s LeaseTime and re-enters; the
// re-entry's script reaches Redis 2 s late, after the old hold expired
// there, so it starts a fresh hold. Meanwhile the old hold ended locally
// and was queued for a give-back "if X's count is 1": the fresh grant also
// counts 1, and X's new Held must keep it ("while a give-back is out,
// nothing grants to the same owner").
func TestGiveBackDoesNotDeleteAGrantInFlight(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t) // a 3 s read timeout: the held re-entry is answered, not retried
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "giveback-in-flight", "owner-x"
	x := rt.Lock(name, actorlock.WithOwner(owner))
	old, err := x.Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	held := p.on(1, holdCommand, 2*time.Second, func(c respCommand) bool { return isAcquireOn(c, name, owner) })
	re := acquireAsync(ctx, x, actorlock.WaitTime(10*time.Second))
	await(t, held.hits, time.Second, "the re-entry's attempt")
	endsLost(t, old, 2*time.Second, "the old hold did not end at its lease")

	got := await(t, re, 5*time.Second, "the re-entry")
	require.NoError(t, got.err, "the lock was free when the re-entry reached Redis")
	// A give-back still out runs within 100 ms: let it.
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, got.h.Err(), "X holds, by its own account")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "and in Redis")
	othersTry(t, ctx, other.Lock(name), got.h, "another owner after the give-back")
	require.NoError(t, got.h.Unlock(ctx))
}

// D: a release retried after its duplicate guard (the unlock latch, kept
// for one call timeout) expired must not release again. The owner holds
// twice; the inner Unlock's first attempt runs but its reply is lost, and
// every try after it is refused for 2.5 s, past the latch's 1 s; then a
// retry gets through. It must release nothing more: the outer acquisition
// was never unlocked.
func TestReleaseRetriedPastItsLatchReleasesOnce(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(time.Second))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name = "release-past-latch"
	outer, inner := holdTwice(t, ctx, rt.Lock(name), direct)
	owner := outer.Owner()

	var until atomic.Int64
	until.Store(time.Now().Add(2500 * time.Millisecond).UnixNano())
	release := func(c respCommand) bool { return isRelease(c, name, owner, false) }
	dropped := p.on(1, dropReply, 0, release)
	p.on(1000, refuse, 0, func(c respCommand) bool { return release(c) && time.Now().UnixNano() < until.Load() })
	// The retry that gets through is answered late, leaving a window in
	// which Redis may already have let another owner in.
	through := p.on(1, delayReply, 1500*time.Millisecond, release)
	require.Error(t, inner.Unlock(ctx), "the release failed as far as the caller knows")
	await(t, dropped.hits, time.Second, "the first attempt, whose reply was lost")
	await(t, through.ran, 5*time.Second, "the retry after the refusals, run (its reply is on its way back)")
	othersTry(t, ctx, other.Lock(name), outer, "another owner after the inner release's retry")
	select {
	case <-inner.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the inner release was not carried through")
	}
	require.ErrorIs(t, inner.Err(), actorlock.ErrUnlocked)
	require.NoError(t, outer.Err(), "the outer acquisition, never unlocked, is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "one hold is left in Redis")
	require.NoError(t, outer.Unlock(ctx))
	emptied(t, ctx, direct, name, "one Unlock per acquisition frees the lock")
}

// E: a free fair lock must go to the head of its Redis queue even when the
// runtime's local order differs. W1's first attempt finds the lock free but
// reaches Redis 1.3 s late, past its 1 s lease as the runtime counts it, so
// that grant is given back; the give-back is refused until W2, which
// arrived meanwhile, has joined the queue; W1 joins behind it. The lock is
// then free with W2 at the head of the Redis queue and W1 at the front of
// the local one: W2 must be granted promptly, not when W1 gives up.
func TestFairFreeLockGoesToTheRedisHead(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "fair-local-order"
	queue, _ := fairKeys(name)
	l := rt.FairLock(name)
	late := p.on(1, holdCommand, 1300*time.Millisecond, func(c respCommand) bool {
		return isAcquireOn(c, name, rt.ID()+":*")
	})
	w1 := acquireAsync(ctx, l, actorlock.LeaseTime(time.Second), actorlock.WaitTime(8*time.Second))
	o1 := ownerIn(await(t, late.hits, time.Second, "W1's first attempt"), rt)
	var open atomic.Bool
	p.on(1000, refuse, 0, func(c respCommand) bool { return !open.Load() && isRelease(c, name, o1, true) })
	w2 := acquireAsync(ctx, l, actorlock.WaitTime(15*time.Second))
	require.Eventually(t, func() bool {
		q := direct.LRange(ctx, queue, 0, -1).Val()
		return len(q) == 1 && q[0] != o1
	}, 10*time.Second, 5*time.Millisecond, "W2 joins the Redis queue while W1's late grant is being given back")
	open.Store(true)
	freed := time.Now()
	require.Eventually(t, func() bool {
		q := direct.LRange(ctx, queue, 0, -1).Val()
		return len(q) == 2 && q[1] == o1 || direct.Exists(ctx, name).Val() == 1
	}, 5*time.Second, 5*time.Millisecond, "W1 joins behind W2 (or someone got the lock)")

	got := await(t, w2, 15*time.Second, "W2")
	require.NoError(t, got.err, "W2, the head of the Redis queue, gets the free lock")
	assert.Less(t, time.Since(freed), 2*time.Second, "promptly once it is free, not when W1 gives up")
	require.NoError(t, got.h.Unlock(ctx))
	g1 := await(t, w1, 10*time.Second, "W1")
	require.NoError(t, g1.err, "then W1")
	require.NoError(t, g1.h.Unlock(ctx))
}

// F: a fair waiter whose process dies right after joining the queue (before
// its first refresh) must not hold up the line for more than about three
// watchdog leases, whatever its place's own wait (here the fair wait
// timeout, 5 min).
func TestFairWaiterDeadBeforeItsFirstRefresh(t *testing.T) {
	t.Parallel()
	const watchdog = 3 * time.Second
	srv, rdb, rt := setup(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, time.Minute)
	const name = "fair-dead-at-once"
	queue, timeouts := fairKeys(name)
	holder, err := rt.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	w := spawn(t, "fairwait", map[string]string{"REDIS_ADDR": srv.Addr, "LOCK_NAME": name, "WATCHDOG_MS": "3000", "WAITERS": "1"})
	w.expect(t, "QUEUED", 10*time.Second)
	require.NoError(t, w.cmd.Process.Kill(), "killed at once: its place was never refreshed")
	_ = w.cmd.Wait()

	got := make(chan error, 1)
	acquired := make(chan time.Time, 1)
	go func() {
		h, err := rt.FairLock(name).Acquire(ctx, actorlock.WaitTime(30*time.Second))
		if err == nil {
			acquired <- time.Now()
			err = h.Unlock(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 2 }, 5*time.Second, time.Millisecond,
		"the live waiter queued behind the dead one")
	require.NoError(t, holder.Unlock(ctx))
	unlocked := time.Now()
	select {
	case at := <-acquired:
		assert.Less(t, at.Sub(unlocked), 3*watchdog, "within 3 leases of the unlock")
		require.NoError(t, <-got)
	case err := <-got:
		t.Fatalf("the live waiter failed: %v", err)
	case <-time.After(3*watchdog + 2*time.Second):
		q, _ := rdb.LRange(ctx, queue, 0, -1).Result()
		z, _ := rdb.ZRangeWithScores(ctx, timeouts, 0, -1).Result()
		t.Fatalf("the live waiter is still waiting %v after the unlock: queue %v, timeouts %v", time.Since(unlocked), q, z)
	}
}

// ---- suspicions: each probe fails if the suspicion is real ----

// Suspicion 1: a hold abandoned (its validity ran out) while a partial
// release or a WithOwner re-entry of its owner is in flight is given back
// "if the count is what it was", which that script changed: nothing is
// given back, and a hold nobody renews or uses keeps the name for up to a
// lease. The promise: a hold declared lost is released in Redis as soon as
// Redis answers (docs/guarantees.md, "A lost hold is given back").
//
// Redis keeps the hold longer than the runtime counts it valid because its
// acquisition reached Redis 1.5 s late (held back; its reply still came
// within the validity the runtime counts from the send).
func TestSuspicion1AbandonedHoldWithAScriptInFlightIsGivenBack(t *testing.T) {
	t.Parallel()
	const lease, late = 2 * time.Second, 1500 * time.Millisecond
	setupLate := func(t *testing.T, name, owner string) (*respProxy, *redis.Client, *actorlock.Lock, *actorlock.Held) {
		p, direct, rt := proxied(t, actorlock.WithWatchdog(3*time.Second))
		ctx := ctxFor(t, 30*time.Second)
		x := rt.Lock(name, actorlock.WithOwner(owner))
		held := p.on(1, holdCommand, late, func(c respCommand) bool { return isAcquireOn(c, name, owner) })
		h, err := x.Acquire(ctx, actorlock.LeaseTime(lease))
		require.NoError(t, err)
		await(t, held.hits, time.Second, "the acquisition, held back")
		require.Greater(t, direct.PTTL(ctx, name).Val(), lease-200*time.Millisecond, "Redis counts the lease from its late arrival")
		return p, direct, x, h
	}
	t.Run("partial release in flight", func(t *testing.T) {
		t.Parallel()
		const name, owner = "s1-partial", "owner-s1p"
		p, direct, x, old := setupLate(t, name, owner)
		ctx := ctxFor(t, 30*time.Second)
		// A re-entry that leaves the old hold's validity where it is.
		inner, err := x.Acquire(ctx, actorlock.LeaseTime(300*time.Millisecond))
		require.NoError(t, err)
		require.Equal(t, "2", direct.HGet(ctx, name, owner).Val())
		// Its release runs at once; its reply comes after the old hold's
		// validity ran out.
		slow := p.on(1, delayReply, time.Until(old.ValidUntil())+500*time.Millisecond, func(c respCommand) bool { return isRelease(c, name, owner, false) })
		_ = inner.Unlock(ctx)
		await(t, slow.hits, time.Second, "the partial release")
		endsLost(t, old, time.Second, "the old hold did not end at its validity")
		freedWithin(t, ctx, direct, name, 500*time.Millisecond, "the abandoned hold is given back once Redis answers (the partial release was answered)")
	})
	t.Run("re-entry in flight", func(t *testing.T) {
		t.Parallel()
		const name, owner = "s1-reentry", "owner-s1r"
		p, direct, x, old := setupLate(t, name, owner)
		ctx := ctxFor(t, 30*time.Second)
		// The re-entry reaches Redis after the old hold's validity ran out
		// (Redis still has it: count 2).
		held := p.on(1, holdCommand, time.Until(old.ValidUntil())+300*time.Millisecond, func(c respCommand) bool { return isAcquireOn(c, name, owner) })
		re := acquireAsync(ctx, x, actorlock.WaitTime(10*time.Second))
		await(t, held.hits, time.Second, "the re-entry, held back")
		endsLost(t, old, 2*time.Second, "the old hold did not end at its validity")
		got := await(t, re, 5*time.Second, "the re-entry")
		if got.err == nil {
			require.NoError(t, got.h.Unlock(ctx), "the owner's only live acquisition")
		}
		freedWithin(t, ctx, direct, name, 500*time.Millisecond, "nothing of the owner is left once its only live acquisition ended")
	})
}

// Suspicion 2: Close drops a give-back that is waiting to be tried again
// (retryLater, stepDue while draining), so a late grant stays in Redis for
// up to a lease after Close. The promise: Close releases every hold.
func TestSuspicion2CloseCarriesThroughAPendingGiveBack(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "s2-close-giveback"
	// The grant reaches Redis 2.2 s after it was sent, past its 2 s lease
	// as the runtime counts it: it is given back, and Redis keeps it until
	// 2 s after its arrival unless that give-back runs.
	late := p.on(1, holdCommand, 2200*time.Millisecond, func(c respCommand) bool { return isAcquireOn(c, name, rt.ID()+":*") })
	var closing atomic.Bool
	refused := p.on(1000, refuse, 0, func(c respCommand) bool {
		keys, argv, ok := c.script()
		return !closing.Load() && ok && keys[0] == name && len(argv) > 4 && argv[4] != ""
	})
	_, err := rt.Lock(name).TryAcquire(ctx, actorlock.LeaseTime(2*time.Second))
	require.ErrorIs(t, err, actorlock.ErrNotAcquired, "the late grant is not handed out")
	await(t, late.hits, time.Second, "the acquisition, held back")
	for range 4 {
		await(t, refused.hits, 3*time.Second, "the give-back's tries")
	}
	require.Equal(t, int64(1), direct.Exists(ctx, name).Val(), "the late grant is in Redis, its give-back to be tried again")
	closing.Store(true)
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, rt.Close(cctx))
	freedWithin(t, ctx, direct, name, 500*time.Millisecond, "Close carried the late grant's give-back through")
}

// Suspicion 3: fair_unlock.lua's retry of a hand-off whose reply was lost
// returns no token when the fencing counter is missing (here deleted by
// another client between the tries; it also expires), so the hand-off is
// not recognised: the waiter, holding in Redis without knowing, later
// re-enters its own hidden hold (count 2 for one acquisition), and its one
// Unlock leaves the lock held by nobody.
func TestSuspicion3FairHandoffRetryWithoutACounter(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithWatchdog(3*time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name, waiter = "s3-fair-handoff", "owner-s3w"
	queue, _ := fairKeys(name)
	h, err := rt.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	w := acquireAsync(ctx, rt.FairLock(name, actorlock.WithOwner(waiter)), actorlock.WaitTime(10*time.Second))
	require.Eventually(t, func() bool { return direct.LLen(ctx, queue).Val() == 1 }, 5*time.Second, 5*time.Millisecond, "the waiter joins the queue")
	handoff := func(c respCommand) bool { return isRelease(c, name, h.Owner(), false) && c.scriptOn(name, waiter) }
	dropped := p.on(1, dropReply, 0, handoff)
	retry := p.on(1, holdCommand, 500*time.Millisecond, handoff)
	unlocked := make(chan error, 1)
	go func() { unlocked <- h.Unlock(ctx) }()
	await(t, dropped.hits, time.Second, "the hand-off, whose reply is lost")
	await(t, retry.hits, 2*time.Second, "its retry, held back")
	require.NoError(t, direct.Del(ctx, "redisson_lock_token:{"+name+"}").Err(), "the fencing counter goes meanwhile")
	require.NoError(t, await(t, unlocked, 5*time.Second, "the holder's Unlock"))

	got := await(t, w, 15*time.Second, "the waiter")
	require.NoError(t, got.err, "the waiter the lock was handed to holds it")
	assert.Equal(t, "1", direct.HGet(ctx, name, waiter).Val(), "once, as one acquisition")
	require.NoError(t, got.h.Unlock(ctx))
	assert.Zero(t, direct.Exists(ctx, name).Val(), "its one Unlock frees the lock")
}

// Suspicion 4: a fair waiter whose grant, as the queue's head, comes back
// late (and is given back) re-joins at the back of the queue, behind a
// waiter that joined after it. The promise: fair waiters are served in the
// order they joined the queue.
func TestSuspicion4LateGrantKeepsTheFairWaitersPlace(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name = "s4-fair-late"
	queue, _ := fairKeys(name)
	holder, err := other.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	w1 := acquireAsync(ctx, rt.FairLock(name), actorlock.LeaseTime(time.Second), actorlock.WaitTime(15*time.Second))
	require.Eventually(t, func() bool { return direct.LLen(ctx, queue).Val() == 1 }, 5*time.Second, 5*time.Millisecond, "W1 joins the queue")
	o1 := direct.LIndex(ctx, queue, 0).Val()
	w2 := acquireAsync(ctx, other.FairLock(name), actorlock.WaitTime(15*time.Second))
	require.Eventually(t, func() bool { return direct.LLen(ctx, queue).Val() == 2 }, 5*time.Second, 5*time.Millisecond, "W2 joins behind it")
	// W1's attempt as the head reaches Redis 1.3 s late: a grant past its
	// 1 s lease as the runtime counts it, given back.
	late := p.on(1, holdCommand, 1300*time.Millisecond, func(c respCommand) bool { return isAcquireOn(c, name, o1) })
	require.NoError(t, holder.Unlock(ctx))
	await(t, late.hits, 2*time.Second, "W1's attempt as the head")
	select {
	case g := <-w1:
		require.NoError(t, g.err, "W1")
		require.NoError(t, g.h.Unlock(ctx))
	case g := <-w2:
		if g.err == nil {
			_ = g.h.Unlock(ctx)
		}
		t.Fatalf("W2 was served first (%v), though W1 joined the queue before it", g.err)
	case <-time.After(10 * time.Second):
		t.Fatal("nobody was served")
	}
	g := await(t, w2, 10*time.Second, "W2")
	require.NoError(t, g.err)
	require.NoError(t, g.h.Unlock(ctx))
}

// Suspicion 5a: RedLock's "two members on one server" check compares the
// servers' address strings, with the runtime id appended: a RedLock over
// one Redis, reached by two runtimes, passes validation. The promise:
// "Invalid members (..., two on one server) are reported ... as
// ErrInvalidArgument".
func TestSuspicion5RedLockOverOneServerIsRefused(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	ctx := ctxFor(t, 10*time.Second)
	for what, second := range map[string]string{"same address": srv.Addr, "another name of it": fmt.Sprintf("localhost:%d", srv.Port)} {
		t.Run(what, func(t *testing.T) {
			rt1 := newRuntime(t, client(t, srv.Addr))
			rt2 := newRuntime(t, client(t, second))
			g, err := actorlock.RedLock(rt1.Lock("s5-a"), rt2.Lock("s5-b")).TryAcquire(ctx)
			if err == nil {
				_ = g.Unlock(ctx)
			}
			require.ErrorIs(t, err, actorlock.ErrInvalidArgument, "a RedLock whose two members are on one server (%s and %s)", srv.Addr, second)
		})
	}
}

// Suspicion 5b: MultiLock's global order includes the runtime id, so two
// MultiLocks over the same two locks of one server, built over two
// runtimes, take them in opposite orders and can deadlock. The promise:
// "its members are acquired in one global order (by server, then name), so
// MultiLocks sharing locks cannot deadlock". g1's attempt at lock b is held
// back at the proxy until g2 has started.
func TestSuspicion5MultiLocksOverTwoRuntimesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	direct := client(t, srv.Addr)
	// Both runtimes reach the server by one address.
	lo := newRuntime(t, client(t, p.Addr()))
	hi := newRuntime(t, client(t, p.Addr()))
	if hi.ID() < lo.ID() {
		lo, hi = hi, lo
	}
	warmScripts(t, lo)
	ctx := ctxFor(t, 30*time.Second)
	// The same two locks: g1 = {a on lo, b on hi}, g2 = {b on lo, a on hi}.
	g1 := actorlock.MultiLock(lo.Lock("s5-a"), hi.Lock("s5-b"))
	g2 := actorlock.MultiLock(lo.Lock("s5-b"), hi.Lock("s5-a"))
	heldBack := p.on(1, holdCommand, 1500*time.Millisecond, func(c respCommand) bool {
		keys, _, ok := c.script()
		return ok && keys[0] == "s5-b" && ownerIn(c, hi) != ""
	})
	r1 := make(chan error, 1)
	go func() {
		h, err := g1.Acquire(ctx, actorlock.WaitTime(4*time.Second))
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			err = h.Unlock(ctx)
		}
		r1 <- err
	}()
	await(t, heldBack.hits, 5*time.Second, "g1's attempt at b")
	require.Equal(t, int64(1), direct.Exists(ctx, "s5-a").Val(), "g1 holds a, and waits for b")
	h2, err2 := g2.Acquire(ctx, actorlock.WaitTime(4*time.Second))
	if err2 == nil {
		require.NoError(t, h2.Unlock(ctx))
	}
	err1 := await(t, r1, 10*time.Second, "g1")
	assert.NoError(t, err1, "g1: did the groups wait for each other in a cycle?")
	assert.NoError(t, err2, "g2: did the groups wait for each other in a cycle?")
}

// ---- found by the new simulation (tests/sim), beyond the list ----

// Finding V: an acquisition's first attempt that reaches Redis after its
// own retry was granted and after a re-entry of the owner counts the hold
// once more. The first attempt tells the script the count it saw (0), but
// the script recognises its own earlier run only when the count is that
// plus one; a re-entry in between makes it two. Redis then counts one hold
// that no acquisition releases: after both Unlocks the lock stays held, by
// nobody, for up to a lease ("a first attempt that reaches Redis after its
// own retry counts nothing", docs/guarantees.md, Exactly once).
func TestLateFirstAttemptAfterAReentryDoesNotCountTwice(t *testing.T) {
	t.Parallel()
	p, direct, rt := impatient(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "late-first-after-reentry"
	held := p.on(1, holdCommand, 1500*time.Millisecond, func(c respCommand) bool { return isAcquireOn(c, name, rt.ID()+":*") })
	h, err := rt.Lock(name).Acquire(ctx)
	require.NoError(t, err, "the retry took the lock")
	await(t, held.hits, time.Second, "the first attempt")
	inner, err := rt.Lock(name).Acquire(h.Context())
	require.NoError(t, err, "a re-entry")
	require.Empty(t, held.ran, "the re-entry came before the first attempt reached Redis")
	await(t, held.ran, 5*time.Second, "the first attempt, run by Redis after its retry and the re-entry")
	assert.Equal(t, "2", direct.HGet(ctx, name, h.Owner()).Val(), "two acquisitions, counted twice")
	require.NoError(t, inner.Unlock(ctx))
	require.NoError(t, h.Unlock(ctx))
	freedWithin(t, ctx, direct, name, 500*time.Millisecond, "one Unlock per acquisition frees the lock")
}

// Finding W: one WithOwner id held through two runtimes (as a Redisson
// thread's id may be shared). Runtime 2's hold, taken with a short
// LeaseTime as a re-entry of runtime 1's (Redis counts 2), ends at its
// lease and is given back "if the owner's count is 2": the give-back
// releases both holds, runtime 1's included, while runtime 1 counts its
// own hold valid; a third owner then gets the lock.
func TestGiveBackReleasesOnlyItsOwnHolds(t *testing.T) {
	t.Parallel()
	_, rdb, rt1 := setup(t)
	rt2 := newRuntime(t, rdb)
	other := newRuntime(t, rdb)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "shared-owner-giveback", "owner-shared"
	h1, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	require.Equal(t, "2", rdb.HGet(ctx, name, owner).Val(), "one owner, two holds, through two runtimes")
	endsLost(t, h2, 2*time.Second, "runtime 2's hold did not end at its lease")
	time.Sleep(300 * time.Millisecond) // its give-back runs
	othersTry(t, ctx, other.Lock(name), h1, "another owner after runtime 2's hold ended")
	require.NoError(t, h1.Err(), "runtime 1's hold, never unlocked, is held")
	assert.Equal(t, "1", rdb.HGet(ctx, name, owner).Val(), "runtime 1's hold is left in Redis")
	require.NoError(t, h1.Unlock(ctx))
}

// Finding Z: a give-back retried past the end of the hold it gives back
// must not release a fresh hold of the same WithOwner id (a restarted
// process keeps its owner id), taken through another runtime meanwhile:
// Redis counts that one hold too, so only the fencing counter tells them
// apart. Runtime 1's first attempt reaches Redis 1.3 s late, after its
// caller stopped waiting: the grant (1 s lease) is given back, and every
// try of the give-back is refused until the grant expired and runtime 2
// took the lock afresh; then a try gets through. (The settles of the
// refused tries answer that none ran: the give-back must go on, not be
// dropped as if its outcome were unknown.)
func TestLateGiveBackSparesAFreshHoldOfItsOwnerID(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(2*time.Second))
	rt2 := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "late-giveback-fresh", "owner-restarted"
	late := p.on(1, holdCommand, 1300*time.Millisecond, func(c respCommand) bool { return isAcquireOn(c, name, owner) })
	var open atomic.Bool
	p.on(1000, refuse, 0, func(c respCommand) bool { return !open.Load() && isRelease(c, name, owner, true) })
	_, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(time.Second), actorlock.WaitTime(500*time.Millisecond))
	require.ErrorIs(t, err, actorlock.ErrNotAcquired, "the caller stopped waiting before its first attempt ran")
	await(t, late.ran, 3*time.Second, "the late first attempt, granted by Redis")
	require.Eventually(t, func() bool { return direct.Exists(ctx, name).Val() == 0 }, 3*time.Second, 5*time.Millisecond,
		"the late grant expires at its lease while its give-back is refused")
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err, "runtime 2 once the late grant expired")
	require.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "a fresh hold, not a re-entry of the late grant")
	tries := p.on(1, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) && !settling(c) })
	open.Store(true)
	await(t, tries.ran, 5*time.Second, "a try of runtime 1's give-back, run by Redis")
	time.Sleep(200 * time.Millisecond) // its settle, if any
	require.NoError(t, h2.Err(), "runtime 2's hold is held")
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	require.NoError(t, h2.Unlock(ctx))
	emptied(t, ctx, direct, name, "runtime 2's Unlock frees the lock")
}

// Finding AB (simulation, seed 108): B through a renewal. A renewal of the
// write sent before a downgrade's read was granted renews no read-hold key
// (it carried none), but its late reply moved the read's validity to the
// watchdog lease anyway, since the registration re-made for the read kept
// its generation; once the write was unlocked, the read was valid as long
// as the write would have been, while Redis let a writer in when its key
// expired. A renewal now confirms only the read keys it carried.
func TestRenewalSentBeforeADowngradeDoesNotStretchTheRead(t *testing.T) {
	t.Parallel()
	// The next renewal comes watchdog/3 after this one: the write is
	// unlocked before it, which would renew the read key too.
	const watchdog, lease = 6 * time.Second, time.Second
	p, _, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 30*time.Second)
	const name = "downgrade-renewal"
	rw := rt.ReadWriteLock(name)
	w, err := rw.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	// The next renewal of the write (no read keys yet) runs in Redis, its
	// reply held back while the read is granted.
	late := p.on(1, delayReply, 500*time.Millisecond, func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && len(keys) == 1 && keys[0] == name && len(argv) == 5 && argv[1] == w.Owner() && argv[3] == "0"
	})
	await(t, late.hits, 2*watchdog, "the write's renewal")
	r, err := rw.ReadLocker().Acquire(w.Context(), actorlock.LeaseTime(lease))
	require.NoError(t, err)
	readBy := time.Now()
	time.Sleep(700 * time.Millisecond) // the renewal's reply comes
	require.NoError(t, w.Unlock(ctx))
	require.NoError(t, r.Err(), "the read is held")
	assert.False(t, r.ValidUntil().After(readBy.Add(lease)),
		"the read alone keeps the lock, for its key's lease: valid until %v, not %v", readBy.Add(lease).Format("15:04:05.000"), r.ValidUntil().Format("15:04:05.000"))
}

// Finding AC (simulation, seed 2): an owner's read-hold keys are numbered
// by count, and a read release deletes the newest, whichever acquisition
// it releases (Redisson's layout): the reads left are valid only as long
// as the keys left. A read with a 1 s LeaseTime is re-entered with a 3 s
// one and unlocked once; the release runs, but its reply and those of its
// settling are lost for 1.5 s. The re-entry stayed valid for its 3 s
// lease until the release's outcome was known, while the 1 s key left in
// Redis expired and a writer got in. A read release now shortens the reads
// left as it is sent, since it is carried through until it runs.
func TestReadReleaseInFlightShortensTheReadsLeft(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name = "read-release-in-flight"
	read := rt.ReadWriteLock(name).ReadLocker()
	short, err := read.Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err)
	shortBy := time.Now()
	long, err := read.Acquire(short.Context(), actorlock.LeaseTime(3*time.Second))
	require.NoError(t, err)
	var answer atomic.Bool
	release := func(c respCommand) bool { return isRelease(c, name, short.Owner(), false) }
	dropped := p.on(1000, dropReply, 0, func(c respCommand) bool { return !answer.Load() && release(c) })
	// The Unlock reports the lost reply; the runtime carries the release
	// through meanwhile.
	t.Logf("Unlock: %v", short.Unlock(ctx))
	await(t, dropped.ran, time.Second, "the release, run by Redis, its reply lost")
	time.Sleep(time.Until(shortBy.Add(1500 * time.Millisecond))) // past the key left
	assert.False(t, long.ValidUntil().After(shortBy.Add(time.Second)),
		"the re-entry is valid as long as the key left, until %v, not %v", shortBy.Add(time.Second).Format("15:04:05.000"), long.ValidUntil().Format("15:04:05.000"))
	othersTry(t, ctx, other.ReadWriteLock(name).WriteLocker(), long, "a writer once the key left expired")
	answer.Store(true)
}

// Finding AD (simulation, seed 4): a renewal that Redis held (CLIENT PAUSE
// WRITE) until after one of the owner's read-hold keys expired still
// renewed the lock, which the owner's other read kept alive, and was
// confirmed: the runtime counted the reads valid for another lease. An
// Unlock of one of them deleted the newest key, and with only the dead one
// left, the lock; until its reply came back, a writer could get in beside
// the other read, still valid. A renewal now finds such an owner's holds
// gone.
func TestRenewalAfterAReadKeyExpiredFindsTheReadsGone(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name = "renewal-after-a-read-key-expired"
	read := rt.ReadWriteLock(name).ReadLocker()
	renewed, err := read.Acquire(ctx)
	require.NoError(t, err)
	// Its lease keeps the lock (and the hold, by the runtime's account)
	// past the pause.
	leased, err := read.Acquire(renewed.Context(), actorlock.LeaseTime(6*time.Second))
	require.NoError(t, err)
	keyOne := fmt.Sprintf("{%s}:%s:rwlock_timeout:1", name, renewed.Owner())
	require.Positive(t, direct.PTTL(ctx, keyOne).Val(), "the first read's key")
	// Renewals are held past that key's lease.
	require.NoError(t, direct.Do(ctx, "CLIENT", "PAUSE", (2*watchdog).Milliseconds(), "WRITE").Err())
	time.Sleep(2*watchdog + 300*time.Millisecond) // the held renewals run
	require.Zero(t, direct.Exists(ctx, keyOne).Val(), "the first read's key expired during the pause")
	// The Unlock's reply is held back while another owner tries.
	held := p.on(1, delayReply, time.Second, func(c respCommand) bool { return isRelease(c, name, renewed.Owner(), false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- renewed.Unlock(ctx) }()
	if leased.Err() == nil {
		await(t, held.ran, 2*time.Second, "the Unlock, run by Redis")
	}
	othersTry(t, ctx, other.ReadWriteLock(name).WriteLocker(), leased, "a writer once the first read's key expired")
	t.Logf("Unlock: %v", await(t, unlocked, 5*time.Second, "the Unlock"))
}
