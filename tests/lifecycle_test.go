package tests

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/observe"
	"github.com/actorlock/actorlock/scripts"
)

func TestRedisDownGivesAConnectionErrorNotAHang(t *testing.T) {
	t.Parallel()
	srv, _, rt := setup(t)
	require.NoError(t, srv.Stop())
	ctx := ctxFor(t, 10*time.Second)

	start := time.Now()
	_, err := rt.Lock("down").Acquire(ctx, actorlock.WaitTime(3*time.Second))
	require.Error(t, err)
	assert.NotErrorIs(t, err, actorlock.ErrNotAcquired, "a dead Redis is not a taken lock")
	assert.Less(t, time.Since(start), 3*time.Second)
	t.Logf("acquire against a stopped Redis: %v after %v", err, time.Since(start))

	bctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = rt.Lock("down").Acquire(bctx)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 600*time.Millisecond, "bounded by ctx")
}

func TestFrozenRedisNeverStallsPastTheWaitTime(t *testing.T) {
	t.Parallel()
	srv, rdb, rt := setup(t)
	ctx := ctxFor(t, 10*time.Second)
	require.NoError(t, rdb.Ping(ctx).Err())
	require.NoError(t, srv.Pause())
	defer srv.Resume()
	start := time.Now()
	_, err := rt.Lock("frozen").Acquire(ctx, actorlock.WaitTime(time.Second))
	took := time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, 1100*time.Millisecond, "a waiter never waits longer than its wait time")
}

func TestBadInputGivesSentinelErrors(t *testing.T) {
	t.Parallel()
	srv, _, rt := setup(t)
	ctx := ctxFor(t, 10*time.Second)

	_, err := actorlock.New(nil)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	_, err = actorlock.New((*redis.Client)(nil))
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	c := client(t, srv.Addr)
	for _, opt := range []actorlock.Option{
		actorlock.WithWatchdog(-time.Second), actorlock.WithWatchdog(0), actorlock.WithIdleTimeout(0),
		actorlock.WithCallTimeout(-1), actorlock.WithFencingCounterTTL(-1), actorlock.WithMaxHandoffs(-1),
		actorlock.WithLogger(nil), actorkit.WithActorSystem(nil), nil,
	} {
		_, err = actorlock.New(c, opt)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	}

	for _, name := range []string{"", strings.Repeat("x", 64<<10+1)} {
		l := rt.Lock(name)
		_, err = l.Acquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
		_, err = l.TryAcquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
		_, err = l.IsLocked(ctx)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
		_, err = l.HoldCount(ctx)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
		_, err = l.RemainTTL(ctx)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
		_, err = l.ForceUnlock(ctx)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	}
	_, err = rt.Lock("ok", actorlock.WithOwner("")).Acquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	for _, field := range []string{"actorlock_hold", "mode"} { // fields the lock HASH keeps for itself
		_, err = rt.Lock("ok", actorlock.WithOwner(field)).Acquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, field)
	}
	_, err = rt.Lock("ok", nil).Acquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)

	l := rt.Lock("ok")
	for _, opts := range [][]actorlock.AcquireOption{
		{actorlock.WaitTime(-time.Second)}, {actorlock.LeaseTime(-time.Second)}, {actorlock.LeaseTime(0)}, {nil},
	} {
		_, err = l.Acquire(ctx, opts...)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	}
	_, err = l.TryAcquire(ctx, actorlock.WaitTime(time.Second))
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, "TryAcquire does not wait")
	//lint:ignore SA1012 a nil context must be refused, not panic
	_, err = l.Acquire(nil)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)

	h, err := l.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Unlock(ctx))
	assert.ErrorIs(t, h.Unlock(ctx), actorlock.ErrUnlocked, "Unlock twice")
	assert.ErrorIs(t, h.Err(), actorlock.ErrUnlocked)
	//lint:ignore SA1012 a nil context must be refused, not panic
	assert.ErrorIs(t, h.Unlock(nil), actorlock.ErrInvalidArgument)
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "the second Unlock released nothing")
}

func TestCloseReleasesEverythingAndRefusesLaterCalls(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	rt, err := actorlock.New(rdb)
	require.NoError(t, err)
	ctx := ctxFor(t, 10*time.Second)

	l := rt.Lock("closing")
	h, err := l.Acquire(ctx)
	require.NoError(t, err)
	h2, err := l.Acquire(h.Context()) // reentrant: Close releases the whole count
	require.NoError(t, err)
	waiterErr := make(chan error, 1)
	go func() {
		_, err := rt.Lock("closing").Acquire(ctx)
		waiterErr <- err
	}()
	time.Sleep(100 * time.Millisecond)

	require.NoError(t, rt.Close(ctx))
	assert.ErrorIs(t, <-waiterErr, actorlock.ErrClosed, "waiters fail with ErrClosed")
	for _, held := range []*actorlock.Held{h, h2} {
		select {
		case <-held.Done():
		default:
			t.Fatal("Close must end every Held")
		}
		assert.ErrorIs(t, held.Err(), actorlock.ErrClosed)
		assert.ErrorIs(t, held.Unlock(ctx), actorlock.ErrClosed)
	}
	n, err := rdb.Exists(ctx, "closing").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "Close released the lock in Redis")

	_, err = l.Acquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrClosed)
	_, err = l.TryAcquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrClosed)
	_, err = l.IsLocked(ctx)
	assert.ErrorIs(t, err, actorlock.ErrClosed)
	_, err = l.ForceUnlock(ctx)
	assert.ErrorIs(t, err, actorlock.ErrClosed)
	_, err = rt.Stats(ctx)
	assert.ErrorIs(t, err, actorlock.ErrClosed)
	assert.NoError(t, rt.Close(ctx), "Close again returns the first result")
}

// Not parallel: it counts the process's goroutines.
func TestCloseLeavesNothingRunning(t *testing.T) {
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 30*time.Second)
	require.NoError(t, rdb.Ping(ctx).Err())
	baseline := runtime.NumGoroutine()

	rt, err := actorlock.New(rdb, actorlock.WithWatchdog(300*time.Millisecond))
	require.NoError(t, err)
	holder, err := rt.Lock("leak").Acquire(ctx)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := rt.Lock("leak").Acquire(ctx, actorlock.WaitTime(10*time.Second))
			if assert.NoError(t, err) {
				assert.NoError(t, h.Unlock(ctx))
			}
			h, err = rt.Lock(fmt.Sprintf("leak-%d", i)).Acquire(ctx)
			if assert.NoError(t, err) {
				assert.NoError(t, h.Unlock(ctx))
			}
		}()
	}
	// A foreign holder keeps waiters subscribed through the watchdog's ticks.
	other, err := actorlock.New(client(t, srv.Addr))
	require.NoError(t, err)
	h, err := other.Lock("leak-foreign").Acquire(ctx)
	require.NoError(t, err)
	waiting := make(chan error, 1)
	go func() {
		_, err := rt.Lock("leak-foreign").Acquire(ctx)
		waiting <- err
	}()
	time.Sleep(700 * time.Millisecond)
	require.NoError(t, holder.Unlock(ctx))
	wg.Wait()
	st, err := rt.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Subscriptions, "one channel for the waiter on the foreign lock")

	require.NoError(t, rt.Close(ctx))
	assert.ErrorIs(t, <-waiting, actorlock.ErrClosed)
	require.NoError(t, h.Unlock(ctx))
	require.NoError(t, other.Close(ctx))

	// Polled here, not with require.Eventually, whose own goroutines count.
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > baseline; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines after Close: %d, before New: %d\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
	}
	channels, err := rdb.PubSubChannels(ctx, "*").Result()
	require.NoError(t, err)
	assert.Empty(t, channels, "PUBSUB CHANNELS shows nothing of ours")
	numsub, err := rdb.PubSubNumSub(ctx, "redisson_lock__channel:{leak-foreign}", "redisson_lock__channel:{leak}").Result()
	require.NoError(t, err)
	for ch, n := range numsub {
		assert.Zero(t, n, ch)
	}
	clients, err := rdb.ClientList(ctx).Result()
	require.NoError(t, err)
	assert.NotContains(t, clients, "cmd=subscribe", "no pub/sub connection left")
}

// A process that touched 100k names and released them keeps no per-name
// state: no lock actors, subscriptions or renewals, no registered actor
// processes beyond those it started with, and no heap beyond what
// protoactor's process registry keeps: its 32768 shard maps (1024×32) never
// shrink, so they keep the capacity of their fullest moment, a bounded
// residue measured at 12-38 bytes per name that converges as shards fill. A
// lock actor leaked per name (1-2 KiB) would be 30-100 times that.
func TestManyNamesLeaveNoState(t *testing.T) {
	_, rdb, rt := setup(t, actorlock.WithIdleTimeout(200*time.Millisecond))
	ctx := ctxFor(t, 3*time.Minute)
	touch := func(prefix string, names int) time.Duration {
		const workers = 64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < names; i += workers {
					h, err := rt.Lock(fmt.Sprintf("%s:%d", prefix, i)).Acquire(ctx)
					if err == nil {
						err = h.Unlock(ctx)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		took := time.Since(start)
		require.Eventually(t, func() bool {
			st, err := rt.Stats(ctx)
			return err == nil && st == observe.Stats{}
		}, 30*time.Second, 50*time.Millisecond, "per-name state must go once idle")
		return took
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	processes := func() int {
		n := 0
		for _, shard := range actorkit.System(rt).ProcessRegistry.LocalPIDs.LocalPIDs {
			n += shard.Count()
		}
		return n
	}
	const names = 100_000
	touch("warmup", 50_000) // connection pool, registry shards
	warmHeap, warmProcs := heap(), processes()
	took := touch("name", names)
	grown := int64(heap()) - int64(warmHeap)
	t.Logf("%d names acquired and released in %v; heap grew %d KiB (%d B/name); registered processes %d -> %d",
		names, took, grown>>10, grown/names, warmProcs, processes())
	assert.Equal(t, warmProcs, processes(), "no actor of a released name stays registered")
	assert.Less(t, grown/names, int64(64), "no per-name heap left behind")
	keys, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	t.Logf("Redis keys left: %d (fencing counters)", keys)
	// No lock is left held; what remains is one fencing counter per name,
	// expiring (TestReleasedNamesLeaveNoPermanentKey checks that no key
	// lacks an expiry): each name's request guards went when its actor
	// stopped, idle.
	var counters, guards int
	iter := rdb.Scan(ctx, 0, "*", 10_000).Iterator()
	for iter.Next(ctx) {
		switch k := iter.Val(); {
		case strings.HasPrefix(k, "redisson_lock_token:"):
			counters++
		case k == scripts.RuntimeKey("", rt.ID()):
			// The runtime's record (host and pid, for operators), while it runs.
		case strings.HasPrefix(k, "actorlock_request:"):
			// A request's guard whose deletion (when its name went idle)
			// is still on its way.
			guards++
			ttl, err := rdb.PTTL(ctx, k).Result()
			require.NoError(t, err)
			// -2: deleted since SCAN saw it; -1 would be a guard that
			// never expires.
			assert.True(t, ttl > 0 || ttl == -2, "guard %s expires (PTTL %v)", k, ttl)
		default:
			t.Errorf("key left behind: %q", k)
		}
	}
	require.NoError(t, iter.Err())
	assert.LessOrEqual(t, counters, 50_000+names, "at most one fencing counter per name")
	assert.Less(t, guards, 100, "request guards go with their name's actor")
}
