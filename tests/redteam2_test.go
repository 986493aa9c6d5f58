package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// Second red-team pass over the exact-safety stop (6305fdd..), aimed at
// its newest part (468be84..): the token condition on give-backs,
// settleAnswer, carryThrough's mayWorkLater. Each test fails on ade4799
// and passes with its fix.

// awaitBusy starts another client's script that keeps Redis busy for d
// and returns once Redis answers BUSY; the channel yields the script's
// outcome when it ends.
func awaitBusy(t *testing.T, srvAddr string, d time.Duration) <-chan error {
	t.Helper()
	admin := client(t, srvAddr)
	require.NoError(t, admin.ConfigSet(context.Background(), "busy-reply-threshold", "20").Err())
	done := make(chan error, 1)
	go func() { done <- busyFor(t, client(t, srvAddr), d) }()
	probe := client(t, srvAddr)
	require.Eventually(t, func() bool {
		err := probe.Ping(context.Background()).Err()
		return err != nil && strings.HasPrefix(err.Error(), "BUSY")
	}, 2*time.Second, 5*time.Millisecond, "Redis answers BUSY")
	return done
}

// RT2-1. An acquisition attempt answered with an error reply (BUSY: it
// did nothing; unsettled() calls it a known outcome) is taken by
// lockActor.attempted for one that "may have taken effect" (mayHaveRun is
// true for any redis.Error), and a give-back "if the owner counts
// seen+1 = 1" is queued with token 0, so the fencing counter is not
// checked. One WithOwner id is held through runtime 2 (Redis counts 1);
// runtime 1's TryAcquire of the same id meets BUSY; its give-back, retried
// until Redis is free, finds count 1 and releases runtime 2's hold while
// runtime 2 holds it: a third owner gets the lock. (docs/guarantees.md: "A
// give-back releases only this runtime's grants".)
func TestRedTeam2RefusedAttemptGivesBackAnotherRuntimesHold(t *testing.T) {
	t.Parallel()
	srv, rdb, rt1 := setup(t)
	rt2 := newRuntime(t, rdb)
	other := newRuntime(t, rdb)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt2-busy-attempt", "owner-shared-busy"
	// Runtime 1 has learnt the server's clock and loaded its scripts.
	w, err := rt1.Lock(name + ":warm").Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Unlock(ctx))

	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, "1", rdb.HGet(ctx, name, owner).Val())

	busy := awaitBusy(t, srv.Addr, time.Second)
	_, err = rt1.Lock(name, actorlock.WithOwner(owner)).TryAcquire(ctx)
	t.Logf("runtime 1's TryAcquire: %v", err)
	require.Error(t, err, "Redis was busy: the attempt did nothing")
	require.NoError(t, await(t, busy, 5*time.Second, "the busy script"))
	time.Sleep(time.Second) // runtime 1's give-back, if any, is retried (every 100 ms) and runs

	require.NoError(t, h2.Err(), "runtime 2's hold, never unlocked, is held")
	assert.Equal(t, "1", rdb.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds the lock")
	require.NoError(t, h2.Unlock(ctx))
}

// RT2-1b. The same line ends a perfectly good hold: a re-entry answered
// BUSY (it did nothing) makes lockActor.attempted abandon the outer hold
// as lost ("a re-entry's outcome stayed unknown") and give it back,
// although the outcome was known and the outer hold was never touched.
func TestRedTeam2ReentryAnsweredBusyEndsTheOuterHold(t *testing.T) {
	t.Parallel()
	srv, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt2-busy-reentry"
	h, err := rt.Lock(name).Acquire(ctx)
	require.NoError(t, err)
	busy := awaitBusy(t, srv.Addr, time.Second)
	_, err = rt.Lock(name).TryAcquire(h.Context())
	t.Logf("re-entry: %v", err)
	require.Error(t, err, "Redis was busy: the re-entry did nothing")
	require.NoError(t, await(t, busy, 5*time.Second, "the busy script"))
	time.Sleep(500 * time.Millisecond)
	assert.NoError(t, h.Err(), "the outer hold was never touched")
	assert.Equal(t, "1", rdb.HGet(ctx, name, h.Owner()).Val(), "Redis still counts the outer hold")
}

// RT2-2. The token condition assumes the fencing counter is there, but it
// expires WithFencingCounterTTL after the name's last acquisition while
// the hold lives on (renewed by the watchdog); options.go even says "a
// counter that expires while its lock is held changes nothing". A hold
// older than the counter's TTL that is lost locally (renewals ran in Redis
// but their replies came late) is then given back with IfToken = its
// token; the script GETs nil, answers "count or token differs" and the
// give-back is dropped as done: the orphan keeps the name from everyone for
// the rest of the last renewal's lease, and the same owner's next
// acquisition re-enters the orphan (count 2) instead of starting a fresh
// hold. With the default TTL (1 min) this is any hold held over a minute.
// Fixed: the counter lives as long as the hold (no TTL below the lease;
// renewals extend it with the lock).
// (docs/guarantees.md, "A lost hold is given back": released "as soon as
// Redis answers"; TestRenewedButUnconfirmedHoldIsGivenBack with an old hold.)
func TestRedTeam2LostHoldOlderThanItsCounterIsGivenBack(t *testing.T) {
	t.Parallel()
	p, admin, rt := proxied(t, actorlock.WithWatchdog(givebackLease),
		actorlock.WithCallTimeout(time.Second), actorlock.WithFencingCounterTTL(time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt2-old-hold"
	l := rt.Lock(name, actorlock.WithOwner(rt.ID()+":me"))
	h, err := l.Acquire(ctx)
	require.NoError(t, err)
	// The hold outlives the counter's TTL (1 s) twice over: the counter,
	// which the give-back below reads, lives on with the hold.
	time.Sleep(2 * time.Second)
	require.NoError(t, h.Err())
	require.Equal(t, int64(1), admin.Exists(ctx, "redisson_lock_token:{"+name+"}").Val(),
		"the fencing counter lives as long as the hold, whatever its TTL")

	start := time.Now()
	p.on(100000, delayReply, 0, func(c respCommand) bool {
		if os.Getenv("RT2_DEBUG") != "" {
			keys, argv, _ := c.script()
			t.Logf("%v %s keys=%v argv=%v", time.Since(start).Round(time.Millisecond), c.name(), keys, argv)
		}
		return false
	})
	// From now on every renewal runs in Redis, but its reply comes late.
	p.on(1000, delayReply, givebackLease+500*time.Millisecond, func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && len(keys) == 1 && keys[0] == name && len(argv) == 2 && argv[1] == h.Owner()
	})
	select {
	case <-h.Done():
	case <-time.After(2 * givebackLease):
		t.Fatal("Done did not close although no renewal was confirmed for a lease")
	}
	lost := time.Now()
	require.ErrorIs(t, h.Err(), actorlock.ErrLost)
	h2, err := l.Acquire(ctx, actorlock.WaitTime(5*time.Second), actorlock.LeaseTime(5*time.Second))
	require.NoError(t, err)
	t.Logf("the same owner's next acquisition %v after Done: Redis counts %v (PTTL %v)", time.Since(lost), admin.HGetAll(ctx, name).Val(), admin.PTTL(ctx, name).Val())
	assert.Equal(t, map[string]string{h2.Owner(): "1"}, ownersOf(admin.HGetAll(ctx, name).Val()),
		"the lost hold was given back as soon as Redis answered: the same owner's next hold starts at count 1, never re-entering the lost one")
	require.NoError(t, h2.Unlock(ctx))
	freedWithin(t, ctx, admin, name, 300*time.Millisecond, "its one Unlock frees the lock")
}

// misconf makes Redis refuse every write with MISCONF (a snapshot failed:
// its directory is gone), as a full or broken disk does, and returns the
// function that lets writes through again. srv must have been started with
// --enable-protected-configs yes.
func misconf(t *testing.T, ctx context.Context, admin *redis.Client) (clear func()) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gone")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, admin.ConfigSet(ctx, "dir", dir).Err())
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, admin.ConfigSet(ctx, "save", "3600 1").Err())
	require.NoError(t, admin.BgSave(ctx).Err())
	require.Eventually(t, func() bool {
		return strings.Contains(admin.Info(ctx, "persistence").Val(), "rdb_last_bgsave_status:err")
	}, 5*time.Second, 5*time.Millisecond, "the snapshot failed")
	err := admin.Set(ctx, "misconf-probe", 1, 0).Err()
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "MISCONF"), "writes are refused: %v", err)
	return func() { require.NoError(t, admin.ConfigSet(ctx, "save", "").Err()) }
}

// RT2-3. carryThrough now stops on a refusal "no retry changes"
// (!mayWorkLater), but mayWorkLater counts as passing only ErrNotRun,
// transport errors, LOADING/READONLY/TRYAGAIN/CLUSTERDOWN/MASTERDOWN/
// NOREPLICAS, BUSY and OOM. MISCONF (a failed snapshot: writes refused
// until the disk is fixed, or a later snapshot succeeds) is a reply that
// passes, yet it ends the carrying-through at the first try: the permits
// taken for a waiter that had gone are never given back. A plain semaphore
// with one permit: an Acquire whose reply comes after its ctx ended takes
// the permit; its give-back meets MISCONF and is dropped; once writes pass
// again the pool stays at 0 for ever.
// (docs/guarantees.md, "Nothing is stranded": "A cancelled Take or Acquire gives back what it won the race
// for"; direct.go: "an item or a permit does not expire".) Before 1f828fc
// it was retried until it acted.
func TestRedTeam2PermitGiveBackSurvivesAPassingRefusal(t *testing.T) {
	t.Parallel()
	srv := startRedis(t, "--enable-protected-configs", "yes")
	p := startRESPProxy(t, srv.Addr)
	direct := client(t, srv.Addr)
	rt := newRuntime(t, client(t, p.Addr()))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt2-misconf-sem"
	require.NoError(t, direct.Set(ctx, name, 1, 0).Err())
	sem := rt.Semaphore(name)
	ok, err := sem.TryAcquire(ctx, 1) // loads the scripts, learns the clock
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, sem.Release(ctx, 1))
	require.Equal(t, "1", direct.Get(ctx, name).Val())

	acquire := func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && len(keys) == 3 && keys[0] == name && guarded(keys) && len(argv) == 4 && argv[0] == "1" && argv[3] != "1"
	}
	late := p.on(1, delayReply, 1500*time.Millisecond, acquire)
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = sem.Acquire(actx, 1)
	t.Logf("Acquire: %v", err)
	require.Error(t, err, "the caller stopped waiting before the reply came")
	await(t, late.ran, 2*time.Second, "the acquisition, run by Redis")
	require.Equal(t, "0", direct.Get(ctx, name).Val(), "the late acquisition took the permit")
	clear := misconf(t, ctx, direct)
	time.Sleep(2 * time.Second) // the reply arrives; the give-back meets MISCONF
	clear()
	assert.Eventually(t, func() bool { return direct.Get(ctx, name).Val() == "1" }, 5*time.Second, 20*time.Millisecond,
		"the permit nobody took is back once Redis takes writes again (pool: %s)", direct.Get(ctx, name).Val())
}

// RT2-4. A settle that could not get Redis's answer ends as unknowable{err}
// (settleStep.apply), but unknowable unwraps to its last attempt's error,
// and unsettled()/mayHaveRun() judge by that: when the last settle attempt
// was answered with an error reply (BUSY: another client's script runs),
// unsettled(unknowable{BUSY}) is false, so released() takes the release
// for one that did not run (releaseFailed) and sends it again as a new
// request, although its first attempt acted: one Unlock releases twice.
// h1 and h2 are one owner's two holds (count 2); h2's release acts (2 ->
// 1) and every reply of it is lost; its settles are lost too, until Redis
// is busy for the last ones; the release is run again once Redis is free
// and releases h1's hold as well. (docs/guarantees.md, "Exactly once": "A
// lock script never takes effect twice for one request"; "Nothing is left
// behind": a release whose outcome Redis does not confirm "ends as lost".)
// A last settle attempt refused at dial (Redis restarting) does the same:
// mayHaveRun(unknowable{dial error}) is false.
func TestRedTeam2UnknowableReleaseIsNotRunAgain(t *testing.T) {
	t.Parallel()
	const ct, lease = 300 * time.Millisecond, 5 * time.Second
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(ct), actorlock.WithWatchdog(lease))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 40*time.Second)
	const name = "rt2-unknowable-release"
	h1, h2 := holdTwice(t, ctx, rt.Lock(name), direct)

	runs := make(chan string, 100) // the guard of every release attempt that is not a settle
	p.on(1000, delayReply, 0, func(c respCommand) bool {
		if isRelease(c, name, h1.Owner(), false) && !settling(c) {
			keys, _, _ := c.script()
			runs <- keys[len(keys)-1]
		}
		return false
	})
	release := func(c respCommand) bool { return isRelease(c, name, h1.Owner(), false) && !settling(c) }
	var busyOn, busyOver atomic.Bool
	attempts := p.on(4, dropReply, 0, release) // the first acts; every reply is lost
	p.on(1000, dropReply, 0, func(c respCommand) bool {
		return !busyOn.Load() && isRelease(c, name, h1.Owner(), false) && settling(c)
	})
	late := p.on(1, delayReply, 1500*time.Millisecond, func(c respCommand) bool { return busyOver.Load() && release(c) })

	srvAddr := direct.Options().Addr
	busyDone := make(chan error, 1)
	go func() {
		await(t, attempts.ran, 5*time.Second, "the first attempt ran")
		time.Sleep(3300 * time.Millisecond)
		// The settles' deadline is about 5.6 s after the first attempt; Redis
		// is busy from 3.3 s to about 5.9 s: the last settles meet BUSY.
		busy := awaitBusy(t, srvAddr, 2600*time.Millisecond)
		busyOn.Store(true)
		err := <-busy
		busyOver.Store(true)
		busyDone <- err
	}()
	uerr := h2.Unlock(ctx)
	t.Logf("unlock: %v", uerr)
	require.Equal(t, "1", direct.HGet(ctx, name, h1.Owner()).Val(), "the first attempt released the inner hold")
	require.NoError(t, await(t, busyDone, 15*time.Second, "the busy script"))
	select {
	case <-late.hits:
		t.Logf("the release was sent again as a new request")
	case <-time.After(2 * time.Second):
	}
	t.Logf("h1: open %v, err %v; Redis counts %q", isOpen(h1), h1.Err(), direct.HGet(ctx, name, h1.Owner()).Val())
	guards := map[string]bool{}
	for len(runs) > 0 {
		guards[<-runs] = true
	}
	assert.Len(t, guards, 1, "h2's Unlock is one request: it may not be sent again once it may have acted: %v", guards)
	if isOpen(h1) {
		assert.Equal(t, "1", direct.HGet(ctx, name, h1.Owner()).Val(), "h1's hold, never unlocked and still open, is counted by Redis")
	}
	if oh, err := other.Lock(name).TryAcquire(ctx); err == nil {
		requireNotBoth(t, h1, oh, "another owner after h2's one Unlock")
		require.NoError(t, oh.Unlock(ctx))
	}
}
