package tests

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// Regression tests of the lock runtime's bookkeeping of holds, grants,
// give-backs and retries, each in the interleaving that once broke it. A
// RESP proxy (resp_proxy_test.go) puts each fault on the command it is
// aimed at, so none depends on a race going the right way.

// proxied is a Redis, a runtime that reaches it through a RESP proxy, and a
// direct client. The lock scripts are loaded already, so that a rule aimed
// at a script call meets the call itself, not a NOSCRIPT answer.
func proxied(t *testing.T, opts ...actorlock.Option) (*respProxy, *redis.Client, *actorlock.Runtime) {
	t.Helper()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	direct := client(t, srv.Addr)
	rt := newRuntime(t, client(t, p.Addr()), opts...)
	warmScripts(t, rt)
	return p, direct, rt
}

// warmScripts runs each lock kind's acquire and unlock once.
func warmScripts(t *testing.T, rt *actorlock.Runtime) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	rw := rt.ReadWriteLock("warm:rw")
	for _, l := range []*actorlock.Lock{rt.Lock("warm:lock"), rt.FairLock("warm:fair"), rw.ReadLocker(), rw.WriteLocker()} {
		h, err := l.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, h.Unlock(ctx))
	}
}

// ownerIn is the argument of c that is an owner id of rt, "" if none.
func ownerIn(c respCommand, rt *actorlock.Runtime) string {
	for _, a := range c[1:] {
		if strings.HasPrefix(a, rt.ID()+":") {
			return a
		}
	}
	return ""
}

// isRelease reports whether c is a release script of lock name by owner
// (an unlock or a hand-off: its first argument is the releasing owner,
// its second the holds it releases or the next owner); undo: a
// compare-and-release (a give-back: its fourth argument, the count it
// expects, is set), else a plain one. Attempts, first or settling, all
// match.
func isRelease(c respCommand, name, owner string, undo bool) bool {
	keys, argv, ok := c.script()
	if !ok || keys[0] != name || len(argv) < 7 || argv[0] != owner || !guarded(keys) {
		return false
	}
	if _, err := strconv.Atoi(argv[1]); err != nil {
		return !undo && argv[1] != "" && !strings.HasPrefix(argv[1], "redisson_") // a hand-off: argv[1] is the next owner
	}
	return (argv[3] != "") == undo
}

// guarded reports whether keys end with a request's guard (scripts.Guard).
func guarded(keys []string) bool {
	return len(keys) > 0 && strings.HasPrefix(keys[len(keys)-1], "actorlock_request:")
}

// settling reports whether c is the settle of a guarded script (its last
// argument is "1"): it asks what an earlier attempt did.
func settling(c respCommand) bool {
	keys, argv, ok := c.script()
	return ok && guarded(keys) && len(argv) > 0 && argv[len(argv)-1] == "1"
}

func (p *respProxy) stop(r *proxyRule) {
	p.mu.Lock()
	r.times = 0
	p.mu.Unlock()
}

type gotHold struct {
	h   *actorlock.Held
	err error
}

func acquireAsync(ctx context.Context, l *actorlock.Lock, opts ...actorlock.AcquireOption) <-chan gotHold {
	out := make(chan gotHold, 1)
	go func() {
		h, err := l.Acquire(ctx, opts...)
		out <- gotHold{h, err}
	}()
	return out
}

func await[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("%s: nothing within %v", what, within)
	}
	var zero T
	return zero
}

// Defect 1: a grant that came back after its lease is given back with a
// compare-and-release while Redis still counts 1. If that give-back's
// replies are lost (it is retried) and meanwhile another local owner takes
// and releases the lock, the release must not hand the lock to the owner
// being given back: the give-back's retry would find count 1 again and
// delete the new hold, leaving two holders (ours, which believes it holds,
// and whoever takes the freed key). The fair lock: the waiter whose first
// attempt was that late grant never had a place in the Redis queue; it
// must take one and be granted, not wait out its wait time.
func TestNoGrantToAnOwnerWhileItsGiveBackIsOut(t *testing.T) {
	t.Parallel()
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "lock", true: "fair"}[fair], func(t *testing.T) {
			t.Parallel()
			p, direct, rt := proxied(t)
			other := newRuntime(t, direct)
			ctx := ctxFor(t, 60*time.Second)
			name := "gb:" + t.Name()
			lock := func(r *actorlock.Runtime) *actorlock.Lock {
				if fair {
					return r.FairLock(name)
				}
				return r.Lock(name)
			}
			const lease = 2 * time.Second
			late := p.on(1, delayReply, lease+600*time.Millisecond, func(c respCommand) bool {
				return c.scriptOn(name, "2000") && ownerIn(c, rt) != ""
			})
			o2 := acquireAsync(ctx, lock(rt), actorlock.LeaseTime(lease), actorlock.WaitTime(20*time.Second))
			owner2 := ownerIn(await(t, late.hits, 10*time.Second, "O2's attempt"), rt)
			undo := p.on(1000, dropReply, 0, func(c respCommand) bool { return isRelease(c, name, owner2, true) })
			await(t, undo.hits, 10*time.Second, "the give-back of O2's late grant")

			// Another local owner takes the lock and releases it while the
			// give-back is being retried.
			o1, err := lock(rt).TryAcquire(ctx)
			require.NoError(t, err)
			require.NoError(t, o1.Unlock(ctx))
			p.stop(undo)

			got := await(t, o2, 15*time.Second, "O2's Acquire")
			require.NoError(t, got.err)
			require.Equal(t, owner2, got.h.Owner())
			// A give-back retry still out would run within 100 ms: let it.
			time.Sleep(500 * time.Millisecond)
			require.NoError(t, got.h.Err(), "O2 holds, by its own account")
			assert.Equal(t, map[string]string{owner2: "1"}, ownersOf(direct.HGetAll(ctx, name).Val()), "and in Redis")
			_, err = lock(other).TryAcquire(ctx)
			require.ErrorIs(t, err, actorlock.ErrNotAcquired, "nobody else gets it meanwhile")
			require.NoError(t, got.h.Unlock(ctx))
		})
	}
}

// Defect 2: a re-entry whose owner's hold was deleted in Redis (before the
// watchdog noticed) takes the lock afresh; the old hold is lost, and must
// say so, instead of being merged with the new acquisition and never ending.
func TestReentryFindingTheLockGoneEndsTheOldHold(t *testing.T) {
	t.Parallel()
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "lock", true: "fair"}[fair], func(t *testing.T) {
			t.Parallel()
			_, rdb, rt := setup(t)
			ctx := ctxFor(t, 30*time.Second)
			name := "gone:" + t.Name()
			l := rt.Lock(name)
			if fair {
				l = rt.FairLock(name)
			}
			h1, err := l.Acquire(ctx)
			require.NoError(t, err)
			require.NoError(t, rdb.Del(ctx, name).Err(), "another client deletes the lock")

			// The re-entry takes the free lock afresh. Its ctx descends from
			// h1's, which ends as lost now: Acquire then returns that (and
			// gives the grant back), unless the grant reached it first.
			h2, err := l.Acquire(h1.Context())
			select {
			case <-h1.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the old hold's Done did not close")
			}
			require.ErrorIs(t, h1.Err(), actorlock.ErrLost)
			if err != nil {
				require.ErrorIs(t, err, actorlock.ErrLost)
			} else {
				require.NoError(t, h2.Err(), "a fresh hold")
				assert.Equal(t, map[string]string{h2.Owner(): "1"}, ownersOf(rdb.HGetAll(ctx, name).Val()), "counting 1")
				require.NoError(t, h2.Unlock(ctx))
			}
			require.Eventually(t, func() bool { return rdb.Exists(ctx, name).Val() == 0 }, 5*time.Second, 10*time.Millisecond,
				"nothing is left held")
			assert.Empty(t, rt.Held(), "nothing is listed as held")
		})
	}
}

// The same when the lock was taken afresh by a Redisson thread whose id
// the hold's handle borrowed (WithOwner), once the hold was deleted: the
// re-entry re-enters the thread's hold (Redis counts 2), and the grant's
// mark (the thread's hold has none: the re-entry writes its own) is not
// the old hold's, which ends as lost at once rather than holding on with
// the thread's. The thread's hold is left as it was.
func TestReentryLandingOnARedissonThreadsHoldEndsTheOldHold(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "gone-to-redisson", "3a9e8a52-7c1e-4b43-a3f5-1f2e3d4c5b6a:7"
	l := rt.Lock(name, actorlock.WithOwner(owner))
	h1, err := l.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, name).Err(), "another client deletes the lock")
	require.ErrorIs(t, rdb.Eval(ctx, redissonLock, []string{name}, 30000, owner).Err(), redis.Nil, "the Redisson thread takes the free lock")

	h2, err := l.Acquire(h1.Context())
	select {
	case <-h1.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the old hold's Done did not close: it holds on with the Redisson thread's hold")
	}
	require.ErrorIs(t, h1.Err(), actorlock.ErrLost)
	if err == nil {
		assert.Equal(t, "2", rdb.HGet(ctx, name, owner).Val(), "the re-entry counts beside the thread's hold")
		require.NoError(t, h2.Unlock(ctx))
	}
	require.Eventually(t, func() bool { return rdb.HGet(ctx, name, owner).Val() == "1" }, 5*time.Second, 10*time.Millisecond,
		"the Redisson thread's hold is left as it was")
	time.Sleep(500 * time.Millisecond) // a give-back still out would run by now
	assert.Equal(t, "1", rdb.HGet(ctx, name, owner).Val(), "the Redisson thread's hold is left as it was")
}

// Defect 3: an Unlock whose script never ran (the connection broke before
// it was sent) fails; the owner re-enters; the failed release must still
// release what it was for, not mistake the re-entry's newer fencing token
// for a sign that it ran. The runtime retries the release itself, and the
// re-entry waits for that: the lock ends free after both Unlocks.
func TestRetriedUnlockIsNotMisjudgedAfterAReentry(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "reunlock"
	l := rt.Lock(name, actorlock.WithOwner("owner-o")) // re-enters whatever the ctx
	h1, err := l.Acquire(ctx)
	require.NoError(t, err)
	refused := p.on(4, refuse, 0, func(c respCommand) bool { return isRelease(c, name, h1.Owner(), false) })
	err = h1.Unlock(ctx)
	require.Error(t, err, "every try of the release was refused")
	require.Len(t, refused.hits, 4)

	h2, err := l.Acquire(ctx, actorlock.WaitTime(10*time.Second))
	require.NoError(t, err)
	require.NoError(t, h1.Unlock(ctx), "the retried Unlock succeeds")
	require.NoError(t, h2.Unlock(ctx))
	assert.Zero(t, direct.Exists(ctx, name).Val(), "nothing is left held")
}

// Defect 4: what the library takes on a caller's behalf and then abandons
// (a MultiLock round that failed) is released until Redis confirms it,
// never left renewed with no owner; and a GroupHeld.Unlock that failed for
// a member can be called again, and finishes the job.
func TestAbandonedReleaseIsCarriedThrough(t *testing.T) {
	t.Parallel()
	t.Run("failed MultiLock round", func(t *testing.T) {
		t.Parallel()
		p, direct, rt := proxied(t, actorlock.WithWatchdog(3*time.Second))
		other := newRuntime(t, direct)
		ctx := ctxFor(t, 30*time.Second)
		held, err := other.Lock("ml:b").Acquire(ctx)
		require.NoError(t, err)
		refused := p.on(4, refuse, 0, func(c respCommand) bool {
			keys, argv, ok := c.script()
			return ok && keys[0] == "ml:a" && len(keys) == 4 && argv[3] == "" // lock_unlock, not a give-back
		})
		_, err = actorlock.MultiLock(rt.Lock("ml:a"), rt.Lock("ml:b")).TryAcquire(ctx)
		require.ErrorIs(t, err, actorlock.ErrNotAcquired)
		require.Len(t, refused.hits, 4, "the release of the member taken failed")
		require.Eventually(t, func() bool { return direct.Exists(ctx, "ml:a").Val() == 0 }, 3*time.Second, 10*time.Millisecond,
			"the member is released within a lease, not renewed")
		time.Sleep(time.Second)
		assert.Zero(t, direct.Exists(ctx, "ml:a").Val(), "and stays free")
		require.NoError(t, held.Unlock(ctx))
	})
	t.Run("GroupHeld.Unlock again", func(t *testing.T) {
		t.Parallel()
		p, direct, rt := proxied(t)
		ctx := ctxFor(t, 30*time.Second)
		g, err := actorlock.MultiLock(rt.Lock("gh:a"), rt.Lock("gh:b")).Acquire(ctx)
		require.NoError(t, err)
		a := g.Members()[0]
		p.on(4, refuse, 0, func(c respCommand) bool { return isRelease(c, a.Name(), a.Owner(), false) })
		require.Error(t, g.Unlock(ctx), "member a's release failed")
		require.NoError(t, g.Unlock(ctx), "a second Unlock finishes it")
		assert.Zero(t, direct.Exists(ctx, "gh:a", "gh:b").Val())
		require.ErrorIs(t, g.Unlock(ctx), actorlock.ErrUnlocked)
	})
}

// Defect 5: Unlock called again while the first one's release is in
// flight (the first returned its ctx's error) waits for that release and
// reports its outcome; and a release whose caller stopped waiting still
// completes when it fails at first.
func TestUnlockAgainJoinsTheReleaseUnderWay(t *testing.T) {
	t.Parallel()
	t.Run("in flight", func(t *testing.T) {
		t.Parallel()
		p, direct, rt := proxied(t)
		ctx := ctxFor(t, 30*time.Second)
		h, err := rt.Lock("join").Acquire(ctx)
		require.NoError(t, err)
		slow := p.on(1, delayReply, time.Second, func(c respCommand) bool { return isRelease(c, "join", h.Owner(), false) })
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, h.Unlock(short), context.DeadlineExceeded)
		require.Len(t, slow.hits, 1, "the release is in flight")
		require.NoError(t, h.Unlock(ctx), "the second Unlock reports the release's outcome")
		require.ErrorIs(t, h.Err(), actorlock.ErrUnlocked)
		assert.Zero(t, direct.Exists(ctx, "join").Val())
	})
	t.Run("failed, nobody waiting", func(t *testing.T) {
		t.Parallel()
		p, direct, rt := proxied(t, actorlock.WithWatchdog(3*time.Second))
		ctx := ctxFor(t, 30*time.Second)
		h, err := rt.Lock("orphan").Acquire(ctx)
		require.NoError(t, err)
		p.on(4, refuse, 0, func(c respCommand) bool { return isRelease(c, "orphan", h.Owner(), false) })
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		require.Error(t, h.Unlock(short))
		require.Eventually(t, func() bool { return direct.Exists(ctx, "orphan").Val() == 0 }, 3*time.Second, 10*time.Millisecond,
			"the release completes without the caller")
		select {
		case <-h.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the hold did not end")
		}
		require.ErrorIs(t, h.Err(), actorlock.ErrUnlocked)
		require.NoError(t, h.Unlock(ctx), "and an Unlock now reports it done")
	})
}

// Defect 6: a fair re-entry (WithOwner) whose hold was deleted joins the
// Redis queue at the back; locally it must wait behind the waiters that
// joined before it, so that the real head of the queue is the one that
// contends, instead of waiting out its wait time while the lock is free.
func TestFairReentryThatLostItsHoldQueuesBehindTheHead(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "fair-requeue"
	x := rt.FairLock(name, actorlock.WithOwner("owner-x"))
	hx, err := x.Acquire(ctx)
	require.NoError(t, err)
	w := acquireAsync(ctx, rt.FairLock(name), actorlock.WaitTime(5*time.Second))
	require.Eventually(t, func() bool { return rdb.LLen(ctx, "redisson_lock_queue:{"+name+"}").Val() == 1 },
		5*time.Second, 5*time.Millisecond, "the waiter joins the Redis queue")
	require.NoError(t, rdb.Del(ctx, name).Err(), "another client deletes the lock")

	start := time.Now()
	rx := acquireAsync(ctx, x, actorlock.WaitTime(10*time.Second))
	got := await(t, w, 8*time.Second, "the waiter")
	require.NoError(t, got.err, "the head of the queue gets the free lock")
	assert.Less(t, time.Since(start), 2*time.Second, "promptly, not at the end of its wait")
	require.ErrorIs(t, hx.Err(), actorlock.ErrLost)
	require.NoError(t, got.h.Unlock(ctx))
	gx := await(t, rx, 8*time.Second, "the re-entry")
	require.NoError(t, gx.err, "then the re-entry, behind it")
	require.NoError(t, gx.h.Unlock(ctx))
}

// Defect 7: a lease too short to outlast its own grant's reply is refused
// at the call (it looped grant, give-back, grant), as the watchdog's is.
func TestTinyLeaseIsRefused(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	for _, d := range []time.Duration{time.Microsecond, 9 * time.Millisecond} {
		_, err := rt.Lock("tiny").Acquire(ctx, actorlock.LeaseTime(d))
		require.ErrorIs(t, err, actorlock.ErrInvalidArgument, "LeaseTime(%v)", d)
		_, err = rt.FairLock("tiny-fair").TryAcquire(ctx, actorlock.LeaseTime(d))
		require.ErrorIs(t, err, actorlock.ErrInvalidArgument, "LeaseTime(%v)", d)
	}
	h, err := rt.Lock("tiny").Acquire(ctx, actorlock.LeaseTime(time.Second))
	require.NoError(t, err, "a lease of a second is fine")
	require.ErrorIs(t, h.Extend(ctx, 5*time.Millisecond), actorlock.ErrInvalidArgument)
	require.NoError(t, h.Unlock(ctx))
	assert.Zero(t, rdb.Exists(ctx, "tiny").Val())

	// lease_ms 5 by message: TestInvalidMessagesGetErrorResponses.
}

// impatient is a Redis behind a proxy, a client of it, and a runtime with
// its scripts loaded whose client gives up on a reply after 300 ms.
func impatient(t *testing.T) (*respProxy, *redis.Client, *actorlock.Runtime) {
	t.Helper()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	rt := newRuntime(t, rdb)
	warmScripts(t, rt)
	return p, client(t, srv.Addr), rt
}

// The slow path: an acquire whose reply timed out is retried on another
// connection while the first attempt is still on its way; when the first
// reaches Redis after the retry, it must not count the hold twice.
func TestLateFirstAttemptDoesNotCountTwice(t *testing.T) {
	t.Parallel()
	p, direct, rt := impatient(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "twice"
	held := p.on(1, holdCommand, time.Second, func(c respCommand) bool { return c.scriptOn(name) && ownerIn(c, rt) != "" })
	h, err := rt.Lock(name).Acquire(ctx)
	require.NoError(t, err, "the retry took the lock")
	await(t, held.hits, 5*time.Second, "the first attempt")
	time.Sleep(1500 * time.Millisecond) // the first attempt reaches Redis
	assert.Equal(t, map[string]string{h.Owner(): "1"}, ownersOf(direct.HGetAll(ctx, name).Val()), "counted once")
	require.NoError(t, h.Unlock(ctx))
	assert.Zero(t, direct.Exists(ctx, name).Val(), "one Unlock frees it")
}

// A read hold is valid as long as the read-hold key that keeps the lock
// alive: once a later read of the same owner (with a longer life) is
// released, Redis keeps the lock only as long as the first read's key, and
// Done must close before Redis can let a writer in (Redisson's own scenario:
// read 4 s, read 4 s at +3 s, unlock the second: the lock expires at +4 s).
func TestReadHoldValidityFollowsTheKeysLeft(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	other := newRuntime(t, rdb)
	ctx := ctxFor(t, 30*time.Second)
	const name = "rw-validity"
	rw := rt.ReadWriteLock(name, actorlock.WithOwner("reader")) // one owner, as one Redisson thread
	r1, err := rw.ReadLocker().Acquire(ctx, actorlock.LeaseTime(4*time.Second))
	require.NoError(t, err)
	start := time.Now()
	time.Sleep(2 * time.Second)
	r2, err := rw.ReadLocker().Acquire(ctx, actorlock.LeaseTime(4*time.Second))
	require.NoError(t, err)
	require.NoError(t, r2.Unlock(ctx))
	pttl := rdb.PTTL(ctx, name).Val()
	require.Less(t, pttl, 2500*time.Millisecond, "Redis keeps the lock as long as the first read's key")

	w := acquireAsync(ctx, other.ReadWriteLock(name).WriteLocker(), actorlock.WaitTime(10*time.Second))
	select {
	case <-r1.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first read's Done did not close")
	}
	lostAt := time.Since(start)
	require.ErrorIs(t, r1.Err(), actorlock.ErrLost)
	got := await(t, w, 10*time.Second, "the writer")
	require.NoError(t, got.err)
	grantedAt := time.Since(start)
	assert.Less(t, lostAt, grantedAt, "Done closed before the writer got the lock")
	assert.Less(t, lostAt, 4*time.Second, "within the first read's lease")
	require.NoError(t, got.h.Unlock(ctx))

	// The owner reads no more: its write attempt is not an upgrade.
	wh, err := rw.WriteLocker().Acquire(ctx, actorlock.WaitTime(5*time.Second))
	require.NoError(t, err)
	require.NoError(t, wh.Unlock(ctx))
}

// A re-entry whose first attempt ran after the lock was deleted under its
// owner (its reply lost, so the runtime tries again) must not count twice:
// the retry finds the owner's count where it was before the DEL, the same
// as if the first attempt had not run. The runtime then merged the grant
// into the deleted hold, whose Held never learnt of the break (another
// owner could have held the lock in between). The retry knows by the
// fencing counter (a read: by the token its read-hold key holds) that the
// first attempt ran: the old hold ends as lost, and Redis counts the
// re-entry once.
func TestRetriedReentryAfterADeleteEndsTheOldHold(t *testing.T) {
	t.Parallel()
	p, direct, rt := impatient(t)
	ctx := ctxFor(t, 30*time.Second)
	for _, tc := range []struct {
		kind string
		lock func(string) *actorlock.Lock
	}{
		{"lock", func(n string) *actorlock.Lock { return rt.Lock(n) }},
		{"fair", func(n string) *actorlock.Lock { return rt.FairLock(n) }},
		{"write", func(n string) *actorlock.Lock { return rt.ReadWriteLock(n).WriteLocker() }},
		{"read", func(n string) *actorlock.Lock { return rt.ReadWriteLock(n).ReadLocker() }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			name := "deleted-reentry-" + tc.kind
			old, err := tc.lock(name).Acquire(ctx)
			require.NoError(t, err)
			require.NoError(t, direct.Del(ctx, name).Err())
			dropped := p.on(1, dropReply, 0, func(c respCommand) bool { return c.scriptOn(name) && ownerIn(c, rt) != "" })
			// The re-entry's ctx descends from the old hold's, which ends
			// as lost when the retry's grant comes back: Acquire returns
			// that and gives the grant back, unless the grant reached it
			// first (then it holds once).
			again, err := tc.lock(name).Acquire(old.Context())
			await(t, dropped.hits, time.Second, "the first attempt, whose reply was dropped")
			endsLost(t, old, time.Second, "the deleted hold's Done stayed open")
			if err != nil {
				require.ErrorIs(t, err, actorlock.ErrLost)
			} else {
				field := again.Owner()
				if tc.kind == "write" {
					field += ":write"
				}
				assert.Equal(t, "1", direct.HGet(ctx, name, field).Val(), "the re-entry counted once")
				require.NoError(t, again.Unlock(ctx))
			}
			emptied(t, ctx, direct, name, "nothing is left held")
		})
	}
}

// A read-write lock's owner whose write was deleted under it, taking a read
// (a downgrade, it believes), gets a fresh read hold: the write's Held must
// end as lost, not live on because the owner still holds something there
// (the watchdog renews while the owner holds a read or the write).
func TestWriteDeletedUnderADowngradeEndsTheWriteHold(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "deleted-write-then-read"
	rw := rt.ReadWriteLock(name)
	old, err := rw.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, name).Err(), "another client deletes the lock")
	// The read's ctx descends from the write hold's, which ends as lost:
	// Acquire may return that (giving the grant back).
	h, err := rw.ReadLocker().Acquire(old.Context())
	endsLost(t, old, 3*time.Second, "the deleted write hold's Done stayed open")
	if err != nil {
		require.ErrorIs(t, err, actorlock.ErrLost)
	} else {
		require.NoError(t, h.Unlock(ctx))
	}
	emptied(t, ctx, rdb, name, "nothing is left held")
}

// A re-entry whose grant comes back after its caller has gone (its ctx
// ended) is given back; if that grant shows the owner's hold was gone
// (deleted under it), the old hold must end as lost all the same, not live
// on as if the re-entry had never run.
func TestLateReentryGrantAfterADeleteEndsTheOldHold(t *testing.T) {
	t.Parallel()
	p, direct, rt := impatient(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "late-reentry-after-delete"
	old, err := rt.Lock(name).Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, direct.Del(ctx, name).Err())
	late := p.on(1, delayReply, 250*time.Millisecond, func(c respCommand) bool { return c.scriptOn(name) && ownerIn(c, rt) != "" })
	short, cancel := context.WithTimeout(old.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = rt.Lock(name).Acquire(short)
	require.Error(t, err, "the caller left before the grant came back")
	await(t, late.hits, time.Second, "the re-entry's attempt")
	endsLost(t, old, 3*time.Second, "the deleted hold's Done stayed open")
	emptied(t, ctx, direct, name, "the late grant was given back")
}

// A re-entry none of whose tries is answered (its replies are lost) is
// settled before anything else: the runtime learns that it counted, gives
// that back, and the old hold lives on, still counted once; its caller
// was told the re-entry failed.
func TestReentryWithAnUnknownOutcomeIsSettled(t *testing.T) {
	t.Parallel()
	p, direct, rt := impatient(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "unknown-reentry"
	old, err := rt.Lock(name).Acquire(ctx)
	require.NoError(t, err)
	dropped := p.on(4, dropReply, 0, func(c respCommand) bool {
		keys, _, ok := c.script()
		return ok && len(keys) == 4 && keys[0] == name && ownerIn(c, rt) != "" && !settling(c) // lock_acquire
	})
	_, err = rt.Lock(name).Acquire(old.Context())
	require.Error(t, err, "no try of the re-entry was answered")
	await(t, dropped.hits, time.Second, "the re-entry's tries")
	require.Eventually(t, func() bool { return direct.HGet(ctx, name, old.Owner()).Val() == "1" }, 5*time.Second, 10*time.Millisecond,
		"the re-entry's hold is given back")
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, old.Err(), "the old hold lives on")
	assert.Equal(t, map[string]string{old.Owner(): "1"}, ownersOf(direct.HGetAll(ctx, name).Val()), "counted once")
	require.NoError(t, old.Unlock(ctx))
	emptied(t, ctx, direct, name, "one Unlock frees it")
}

// endsLost requires h's Done to close within d, with ErrLost.
func endsLost(t *testing.T, h *actorlock.Held, d time.Duration, stayedOpen string) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(d):
		t.Fatal(stayedOpen)
	}
	assert.ErrorIs(t, h.Err(), actorlock.ErrLost)
}

// emptied requires name to leave Redis within 5 s.
func emptied(t *testing.T, ctx context.Context, rdb *redis.Client, name, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return rdb.Exists(ctx, name).Val() == 0 }, 5*time.Second, 10*time.Millisecond, what)
}

// Finding AA (simulation, seed 104): an Unlock must wait for its owner's
// unsettled run. The lock is deleted under a hold; a re-entry's tries all
// lose their replies, so its outcome is settled, and its settling is not
// answered for a while; the re-entry's first try started a fresh hold (the
// lock was gone). An Unlock of the old hold called meanwhile ran at once,
// released that fresh hold and reported success for a hold Redis had
// deleted. It now waits for the settling: the settle finds the fresh hold,
// which ends the old one as lost and is given back, and the Unlock says the
// hold was lost.
func TestUnlockWaitsForItsOwnersUnsettledReentry(t *testing.T) {
	t.Parallel()
	p, direct, rt := impatient(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "unlock-while-settling"
	old, err := rt.Lock(name).Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, direct.Del(ctx, name).Err()) // deleted under the hold (unsafe, documented)

	var answer atomic.Bool
	reentry := func(c respCommand) bool {
		keys, _, ok := c.script()
		return ok && len(keys) == 4 && keys[0] == name && ownerIn(c, rt) != "" // lock_acquire
	}
	dropped := p.on(4, dropReply, 0, func(c respCommand) bool { return reentry(c) && !settling(c) })
	held := p.on(1000, dropReply, 0, func(c respCommand) bool { return !answer.Load() && reentry(c) && settling(c) })
	_, err = rt.Lock(name).Acquire(old.Context())
	require.Error(t, err, "no try of the re-entry was answered")
	await(t, dropped.ran, time.Second, "the re-entry's first try, run by Redis")
	await(t, held.hits, 5*time.Second, "the re-entry's settling")
	require.Equal(t, "1", direct.HGet(ctx, name, old.Owner()).Val(), "the re-entry's first try started a fresh hold")

	unlocked := make(chan error, 1)
	go func() { unlocked <- old.Unlock(ctx) }()
	select {
	case err := <-unlocked:
		t.Fatalf("the Unlock ran while its owner's re-entry was unsettled: %v (Redis: %v)", err, direct.HGetAll(ctx, name).Val())
	case <-time.After(500 * time.Millisecond):
	}
	answer.Store(true)
	err = await(t, unlocked, 10*time.Second, "the Unlock, once the re-entry is settled")
	assert.ErrorIs(t, err, actorlock.ErrLost, "the hold Redis deleted is reported lost, not unlocked")
	assert.ErrorIs(t, old.Err(), actorlock.ErrLost)
	emptied(t, ctx, direct, name, "the re-entry's fresh hold is given back")
}
