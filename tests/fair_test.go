package tests

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

func fairKeys(name string) (queue, timeouts string) {
	return "redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}"
}

// 8 owners arriving 100 ms apart, each holding a 1 s lease it never
// releases: each gets the lock when the one before it expires, in arrival
// order.
func TestFairOrderWithExpiringLeases(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		_, rt := d.setup(t)
		ctx := ctxFor(t, 20*time.Second)
		start := time.Now()
		type got struct {
			owner int
			at    time.Duration
		}
		results := make(chan got, 8)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 100 * time.Millisecond)
				_, err := rt.FairLock("fair-expiring").Acquire(ctx, actorlock.WaitTime(10*time.Second), actorlock.LeaseTime(time.Second))
				if assert.NoError(t, err, "owner %d", i) {
					results <- got{i, time.Since(start)}
				}
			}()
		}
		wg.Wait()
		close(results)
		var order []int
		var last time.Duration
		for r := range results {
			order = append(order, r.owner)
			last = max(last, r.at)
		}
		assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, order, "arrival order")
		assert.Less(t, last, 11*time.Second)
		t.Logf("the 8th owner acquired after %v", last)
	})
}

// Owners in 3 processes, arriving 60 ms apart in turn, acquire in arrival
// order: the order is global, not per process.
func TestFairOrderAcrossProcesses(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		_, rt := d.setup(t)
		ctx := ctxFor(t, time.Minute)
		// The test holds the lock while everyone arrives.
		h, err := rt.FairLock("fair-procs").Acquire(ctx)
		require.NoError(t, err)
		start := time.Now().Add(1500 * time.Millisecond) // children are up by then
		const owners, procs = 9, 3
		var workers []*worker
		for p := range procs {
			var mine []string
			for i := p; i < owners; i += procs {
				mine = append(mine, strconv.Itoa(i))
			}
			workers = append(workers, spawn(t, "fair", with(d.workerEnv(), map[string]string{
				"LOCK_NAME": "fair-procs", "OWNERS": strings.Join(mine, ","),
				"START_NS": strconv.FormatInt(start.UnixNano(), 10), "STEP_MS": "60", "HOLD_MS": "20",
			})))
		}
		time.Sleep(time.Until(start.Add(owners*60*time.Millisecond + 200*time.Millisecond)))
		require.NoError(t, h.Unlock(ctx))

		type event struct{ owner, arrived, acquired int64 }
		var events []event
		for _, w := range workers {
			for _, line := range w.wait(t, 30*time.Second) {
				var e event
				if _, err := fmt.Sscanf(line, "A %d %d %d", &e.owner, &e.arrived, &e.acquired); err == nil {
					events = append(events, e)
				}
			}
		}
		require.Len(t, events, owners)
		slices.SortFunc(events, func(x, y event) int { return cmp.Compare(x.acquired, y.acquired) })
		var order []int64
		for _, e := range events {
			order = append(order, e.owner)
		}
		assert.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8}, order, "acquisitions follow arrival order across processes")
	})
}

// 500 waiters queue up behind a holder: all acquire, in arrival order, and
// afterwards neither the queue nor the timeouts keep anything.
func TestFairManyWaitersLeaveNoTrace(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 3*time.Minute)
		const name, waiters = "fair-many", 500
		queue, timeouts := fairKeys(name)
		holder, err := rt.FairLock(name).Acquire(ctx)
		require.NoError(t, err)
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() {
				h, err := rt.FairLock(name).Acquire(ctx, actorlock.LeaseTime(5*time.Second))
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				assert.NoError(t, h.Unlock(ctx))
			})
			// Each joins the Redis queue before the next starts, so the
			// expected order is known.
			require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == int64(i+1) },
				5*time.Second, time.Millisecond, "waiter %d queued", i)
		}
		require.NoError(t, holder.Unlock(ctx))
		wg.Wait()
		require.Len(t, order, waiters)
		assert.True(t, slices.IsSorted(order), "arrival order")
		n, err := rdb.Exists(ctx, queue, timeouts, name).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "queue, timeouts and lock are gone")
	})
}

// A queued waiter whose process dies holds the others up for about a
// watchdog lease (its place is no longer refreshed), and never longer than
// its wait validity: its place expires.
func TestFairDeadWaiterExpires(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		const validity = 2 * time.Second
		rdb, rt := d.setup(t, actorlock.WithWatchdog(time.Second), actorlock.WithFairWaitTimeout(validity))
		ctx := ctxFor(t, 30*time.Second)
		holder, err := rt.FairLock("fair-dead").Acquire(ctx)
		require.NoError(t, err)
		w := spawn(t, "fairwait", with(d.workerEnv(), map[string]string{
			"LOCK_NAME": "fair-dead", "WATCHDOG_MS": "1000", "FAIR_WAIT_MS": "2000",
		}))
		w.expect(t, "QUEUED", 10*time.Second)
		queued := time.Now()

		done := make(chan time.Time, 1)
		go func() {
			h, err := rt.FairLock("fair-dead").Acquire(ctx, actorlock.WaitTime(20*time.Second))
			if assert.NoError(t, err) {
				at := time.Now()
				assert.NoError(t, h.Unlock(ctx))
				done <- at
			}
		}()
		queue, _ := fairKeys("fair-dead")
		require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 2 }, 2*time.Second, 5*time.Millisecond)
		require.NoError(t, w.cmd.Process.Kill())
		require.NoError(t, holder.Unlock(ctx)) // tells the dead waiter, who never hears it

		select {
		case at := <-done:
			// The dead waiter's deadline: the holder's lease left when it
			// queued (at most the 1 s watchdog lease) plus its validity.
			assert.Less(t, at.Sub(queued), time.Second+validity+500*time.Millisecond)
			t.Logf("acquired %v after the dead waiter queued", at.Sub(queued))
		case <-time.After(15 * time.Second):
			t.Fatal("a dead waiter blocked the queue")
		}
	})
}

// A waiter that gives up leaves no place behind: after the holder releases,
// a TryAcquire (which never queues) succeeds at once.
func TestFairTimedOutWaiterLeavesNoEntry(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 10*time.Second)
		holder, err := rt.FairLock("fair-timeout").Acquire(ctx)
		require.NoError(t, err)
		start := time.Now()
		_, err = rt.FairLock("fair-timeout").Acquire(ctx, actorlock.WaitTime(200*time.Millisecond))
		require.ErrorIs(t, err, actorlock.ErrNotAcquired)
		assert.Less(t, time.Since(start), 300*time.Millisecond)

		// A cancelled waiter leaves too.
		cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		_, err = rt.FairLock("fair-timeout").Acquire(cctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)

		queue, timeouts := fairKeys("fair-timeout")
		require.Eventually(t, func() bool {
			return rdb.LLen(ctx, queue).Val() == 0 && rdb.ZCard(ctx, timeouts).Val() == 0
		}, time.Second, 5*time.Millisecond, "the waiters that gave up left the queue")
		require.NoError(t, holder.Unlock(ctx))
		h, err := rt.FairLock("fair-timeout").TryAcquire(ctx)
		require.NoError(t, err, "nobody is queued ahead")
		require.NoError(t, h.Unlock(ctx))
	})
}

// Redis refuses writes (CLIENT PAUSE WRITE) while a waiter waits: the
// waiter still returns by its wait time plus the call timeout, and once Redis writes again its
// place in the queue is given up.
func TestFairWaiterThroughClientPause(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		const callTimeout = 1500 * time.Millisecond
		rdb, rt := d.setup(t, actorlock.WithCallTimeout(callTimeout))
		ctx := ctxFor(t, 30*time.Second)
		holder, err := rt.FairLock("fair-pause").Acquire(ctx)
		require.NoError(t, err)
		waiter := rt.FairLock("fair-pause", actorlock.WithOwner(rt.ID()+":waiter"))
		errc := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := waiter.Acquire(ctx, actorlock.WaitTime(time.Second))
			errc <- err
		}()
		queue, timeouts := fairKeys("fair-pause")
		require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 1 }, time.Second, time.Millisecond)
		admin := d.nodeOf(t, queue) // the lock's keys share its slot
		require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "5000", "WRITE").Err())
		paused := time.Now()

		select {
		case err := <-errc:
			assert.ErrorIs(t, err, actorlock.ErrNotAcquired)
			// It waits for its leave, which Redis holds back, for the call
			// timeout at most.
			assert.Less(t, time.Since(start), time.Second+callTimeout+400*time.Millisecond, "returned by its wait time and the call timeout")
		case <-time.After(3 * time.Second):
			t.Fatal("the waiter did not return by its wait time")
		}
		require.Eventually(t, func() bool {
			q, _ := rdb.LRange(ctx, queue, 0, -1).Result()
			z, _ := rdb.ZRange(ctx, timeouts, 0, -1).Result()
			return !slices.Contains(q, waiter.Owner()) && !slices.Contains(z, waiter.Owner())
		}, 10*time.Second, 20*time.Millisecond, "no entry of the waiter once writes resume")
		assert.Greater(t, time.Since(paused), 4*time.Second, "its place could only go once the pause ended")
		require.NoError(t, holder.Unlock(ctx))
	})
}

func TestFairReentryWatchdogAndTryAcquire(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t, actorlock.WithWatchdog(time.Second))
		ctx := ctxFor(t, 20*time.Second)
		l := rt.FairLock("fair-basics")
		h1, err := l.Acquire(ctx)
		require.NoError(t, err)
		h2, err := l.TryAcquire(h1.Context())
		require.NoError(t, err, "re-entry")
		assert.Greater(t, h2.Token(), h1.Token())
		n, err := l.HoldCount(h1.Context())
		require.NoError(t, err)
		assert.Equal(t, 2, n)

		_, err = rt.FairLock("fair-basics").TryAcquire(ctx)
		require.ErrorIs(t, err, actorlock.ErrNotAcquired)
		queue, _ := fairKeys("fair-basics")
		assert.Zero(t, rdb.LLen(ctx, queue).Val(), "TryAcquire never joins the queue")

		time.Sleep(2500 * time.Millisecond) // past the watchdog lease: renewed
		select {
		case <-h1.Done():
			t.Fatalf("lost: %v", h1.Err())
		default:
		}
		require.NoError(t, h2.Unlock(ctx))
		require.NoError(t, h1.Unlock(ctx))
		assert.Zero(t, rdb.Exists(ctx, "fair-basics").Val())
	})
}

// Many local fair waiters cost one subscription, not one each.
func TestFairLocalWaitersShareOneSubscription(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 30*time.Second)
		other := newRuntime(t, d.client(t))
		holder, err := other.FairLock("fair-subs").Acquire(ctx)
		require.NoError(t, err)
		const waiters = 200
		var wg sync.WaitGroup
		got := make(chan int, waiters)
		for i := range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := rt.FairLock("fair-subs").Acquire(ctx, actorlock.WaitTime(20*time.Second))
				if assert.NoError(t, err) {
					got <- i
					assert.NoError(t, h.Unlock(ctx))
				}
			}()
		}
		queue, _ := fairKeys("fair-subs")
		require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == waiters }, 10*time.Second, 10*time.Millisecond)
		channels, others, patterns := subscriptions(t, ctx, d, "redisson_lock__channel:{fair-subs}*")
		t.Logf("%d local waiters: %d channel subscriptions, %d patterns", waiters, len(channels), patterns)
		assert.Len(t, channels, 1)
		assert.Empty(t, others, "plain and sharded subscriptions are not mixed")
		assert.Zero(t, patterns)
		require.NoError(t, holder.Unlock(ctx))
		wg.Wait()
		close(got)
		assert.Len(t, got, waiters)
	})
}

// A fair waiter that gives up (its wait time passes, its context ends) has
// left the Redis queue when Acquire returns, as Redisson's tryLock has
// before it returns false: nobody behind it waits for a place nobody takes.
func TestFairGiveUpLeavesTheQueueBeforeReturning(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "fair-giveup"
	queue, timeouts := fairKeys(name)
	holder, err := rt.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	queued := func() (int64, int64) {
		return rdb.LLen(ctx, queue).Val(), rdb.ZCard(ctx, timeouts).Val()
	}
	for i := range 10 {
		_, err := rt.FairLock(name).Acquire(ctx, actorlock.WaitTime(200*time.Millisecond))
		require.ErrorIs(t, err, actorlock.ErrNotAcquired)
		n, z := queued()
		require.Zero(t, n+z, "timeout %d: %d queued, %d timeouts when Acquire returned", i, n, z)

		cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		_, err = rt.FairLock(name).Acquire(cctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		n, z = queued()
		require.Zero(t, n+z, "cancel %d: %d queued, %d timeouts when Acquire returned", i, n, z)
	}
	// The same owner's other request keeps the place the first gave up.
	l := rt.FairLock(name, actorlock.WithOwner(rt.ID()+":both"))
	errc := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, actorlock.WaitTime(5*time.Second))
		errc <- err
	}()
	require.Eventually(t, func() bool { n, _ := queued(); return n == 1 }, 5*time.Second, time.Millisecond)
	_, err = l.Acquire(ctx, actorlock.WaitTime(200*time.Millisecond))
	require.ErrorIs(t, err, actorlock.ErrNotAcquired)
	n, z := queued()
	assert.Equal(t, [2]int64{1, 1}, [2]int64{n, z}, "the other request still waits in its place")
	require.NoError(t, holder.Unlock(ctx))
	require.NoError(t, <-errc, "the remaining request got the lock")
}

// A frozen Redis (SIGSTOP) holds a fair waiter that gives up past its wait
// time by the call timeout at most; its place goes once Redis is back.
func TestFairGiveUpWithAFrozenRedisIsBounded(t *testing.T) {
	t.Parallel()
	const wait, callTimeout = time.Second, 1500 * time.Millisecond
	srv, rdb, rt := setup(t, actorlock.WithCallTimeout(callTimeout))
	ctx := ctxFor(t, 30*time.Second)
	const name = "fair-giveup-frozen"
	queue, _ := fairKeys(name)
	holder, err := rt.FairLock(name).Acquire(ctx, actorlock.LeaseTime(time.Minute))
	require.NoError(t, err)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := rt.FairLock(name).Acquire(ctx, actorlock.WaitTime(wait))
		errc <- err
	}()
	require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 1 }, wait/2, time.Millisecond, "queued")
	require.NoError(t, srv.Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	select {
	case err := <-errc:
		took := time.Since(start)
		require.ErrorIs(t, err, actorlock.ErrNotAcquired)
		assert.GreaterOrEqual(t, took, wait)
		assert.Less(t, took, wait+callTimeout+500*time.Millisecond, "past its wait time by the call timeout at most")
		t.Logf("returned after %v (wait %v, call timeout %v)", took, wait, callTimeout)
	case <-time.After(wait + 3*callTimeout):
		t.Fatal("the waiter did not return")
	}
	require.NoError(t, srv.Resume())
	resumed = true
	require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 0 }, 10*time.Second, 20*time.Millisecond,
		"its place goes once Redis answers")
	require.NoError(t, holder.Unlock(ctx))
}

// A process with fair waiters is SIGKILLed: with WithWatchdog(3s) and
// otherwise default options (so a place lasts 5 min by Redisson's rule), a
// live waiter queued behind them gets the free lock within 3 leases of the
// unlock, however many dead waiters are ahead: their places, no longer
// refreshed, are dropped about a lease after the death.
func TestFairDeadWaitersAreDroppedWithinALease(t *testing.T) {
	t.Parallel()
	const watchdog = 3 * time.Second
	for _, dead := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d-dead", dead), func(t *testing.T) {
			srv, rdb, rt := setup(t, actorlock.WithWatchdog(watchdog))
			ctx := ctxFor(t, time.Minute)
			name := fmt.Sprintf("fair-dead-%d", dead)
			queue, timeouts := fairKeys(name)
			holder, err := rt.FairLock(name).Acquire(ctx)
			require.NoError(t, err)
			w := spawn(t, "fairwait", map[string]string{
				"REDIS_ADDR": srv.Addr, "LOCK_NAME": name, "WATCHDOG_MS": "3000", "WAITERS": strconv.Itoa(dead),
			})
			w.expect(t, "QUEUED", 10*time.Second)
			// Let the dead process refresh its places at least once.
			time.Sleep(watchdog / 2)
			require.NoError(t, w.cmd.Process.Kill())
			_ = w.cmd.Wait()

			acquired := make(chan time.Time, 1)
			go func() {
				h, err := rt.FairLock(name).Acquire(ctx, actorlock.WaitTime(50*time.Second))
				if assert.NoError(t, err) {
					acquired <- time.Now()
					assert.NoError(t, h.Unlock(ctx))
				}
			}()
			require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == int64(dead+1) }, 5*time.Second, time.Millisecond,
				"the live waiter queued behind the dead ones")
			require.NoError(t, holder.Unlock(ctx))
			unlocked := time.Now()
			select {
			case at := <-acquired:
				took := at.Sub(unlocked)
				assert.Less(t, took, 3*watchdog, "within 3 leases of the unlock")
				t.Logf("%d dead waiters: the live waiter got the lock %v after the unlock", dead, took)
			case <-time.After(45 * time.Second):
				q, _ := rdb.LRange(ctx, queue, 0, -1).Result()
				z, _ := rdb.ZRangeWithScores(ctx, timeouts, 0, -1).Result()
				t.Fatalf("the live waiter is still waiting: queue %v, timeouts %v", q, z)
			}
		})
	}
}

// A waiter with a wait time takes a place that lasts that long after the
// one ahead (Redisson: waitTime > 0 ? waitTime : threadWaitTime), not the
// fair wait timeout; when it takes the lock, a Redisson waiter behind it
// keeps its own wait from then on.
func TestFairPlaceLastsItsOwnWait(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	const name, wait, redissonWait = "fair-own-wait", 20 * time.Second, time.Minute
	queue, timeouts := fairKeys(name)
	redisNow := func() float64 {
		tm, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		return float64(tm.UnixMilli())
	}
	holder, err := rt.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	l := rt.FairLock(name, actorlock.WithOwner(rt.ID()+":waiter"))
	got := make(chan error, 1)
	go func() {
		h, err := l.Acquire(ctx, actorlock.WaitTime(wait))
		if err == nil {
			err = h.Unlock(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 1 }, 5*time.Second, time.Millisecond)
	place := rdb.ZScore(ctx, timeouts, l.Owner()).Val() - redisNow()
	lockTTL := float64(rdb.PTTL(ctx, name).Val().Milliseconds())
	assert.InDelta(t, lockTTL+float64(wait.Milliseconds()), place, 1000, "its place: the holder's TTL plus its own wait")

	// A Redisson waiter joins behind it as Redisson's RedissonFairLock does.
	const redisson = "redisson-thread:1"
	ahead := rdb.ZScore(ctx, timeouts, l.Owner()).Val() - redisNow()
	require.NoError(t, rdb.ZAdd(ctx, timeouts, redis.Z{Score: ahead + float64(redissonWait.Milliseconds()) + redisNow(), Member: redisson}).Err())
	require.NoError(t, rdb.RPush(ctx, queue, redisson).Err())

	require.NoError(t, holder.Unlock(ctx))
	require.Eventually(t, func() bool { return rdb.LIndex(ctx, queue, 0).Val() == redisson }, 5*time.Second, time.Millisecond)
	left := rdb.ZScore(ctx, timeouts, redisson).Val() - redisNow()
	assert.InDelta(t, float64(redissonWait.Milliseconds()), left, 1000, "the Redisson waiter's place lasts its own wait from the take")
	require.NoError(t, <-got)
	// Take the Redisson waiter out as Redisson's acquireFailed would.
	require.NoError(t, rdb.Del(ctx, queue, timeouts).Err())
}

// A live runtime keeps its waiter's place alive: about a watchdog lease
// ahead, refreshed every third of one. A Redisson waiter behind it moves
// with it, keeping its own wait after it.
func TestFairLiveWaiterKeepsItsPlace(t *testing.T) {
	t.Parallel()
	const watchdog, redissonWait = 3 * time.Second, 10 * time.Second
	_, rdb, rt := setup(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 30*time.Second)
	const name = "fair-live-place"
	queue, timeouts := fairKeys(name)
	redisNow := func() float64 {
		tm, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		return float64(tm.UnixMilli())
	}
	holder, err := rt.FairLock(name).Acquire(ctx, actorlock.LeaseTime(20*time.Second))
	require.NoError(t, err)
	l := rt.FairLock(name, actorlock.WithOwner(rt.ID()+":waiter"))
	got := make(chan error, 1)
	go func() {
		h, err := l.Acquire(ctx)
		if err == nil {
			err = h.Unlock(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 1 }, 5*time.Second, time.Millisecond)
	const redisson = "redisson-thread:1"
	ahead := rdb.ZScore(ctx, timeouts, l.Owner()).Val() - redisNow()
	require.NoError(t, rdb.ZAdd(ctx, timeouts, redis.Z{Score: ahead + float64(redissonWait.Milliseconds()) + redisNow(), Member: redisson}).Err())
	require.NoError(t, rdb.RPush(ctx, queue, redisson).Err())

	var last float64
	for i := range 3 {
		time.Sleep(watchdog / 2)
		// One command, so that no refresh comes between the two scores.
		scores, err := rdb.ZMScore(ctx, timeouts, l.Owner(), redisson).Result()
		require.NoError(t, err)
		mine := scores[0]
		left := mine - redisNow()
		assert.Greater(t, left, 0.0, "sample %d", i)
		assert.LessOrEqual(t, left, float64(watchdog.Milliseconds()), "sample %d: about a lease ahead, not the fair wait", i)
		assert.Greater(t, mine, last, "sample %d: refreshed", i)
		last = mine
		behind := scores[1] - mine
		assert.InDelta(t, float64(redissonWait.Milliseconds()), behind, 100, "sample %d: the Redisson waiter keeps its slot", i)
	}
	require.NoError(t, holder.Unlock(ctx))
	require.NoError(t, <-got)
	require.NoError(t, rdb.Del(ctx, queue, timeouts).Err())
}

// A waiter that gives up while its first attempt (which joins the queue) is
// in flight waits for that attempt, then leaves: Redis, frozen meanwhile,
// ran the join once it woke, and the waiter is gone from the queue when
// Acquire returns.
func TestFairGiveUpWhileItsAttemptIsInFlight(t *testing.T) {
	t.Parallel()
	const callTimeout = 3 * time.Second
	srv, rdb, rt := setup(t, actorlock.WithCallTimeout(callTimeout))
	ctx := ctxFor(t, 30*time.Second)
	const name = "fair-giveup-inflight"
	queue, timeouts := fairKeys(name)
	holder, err := rt.FairLock(name).Acquire(ctx, actorlock.LeaseTime(time.Minute))
	require.NoError(t, err)
	require.NoError(t, srv.Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := rt.FairLock(name).Acquire(wctx)
		errc <- err
	}()
	time.Sleep(800 * time.Millisecond) // given up at 300 ms, its attempt stuck in the frozen Redis
	select {
	case err := <-errc:
		t.Fatalf("answered before its attempt came back: %v", err)
	default:
	}
	require.NoError(t, srv.Resume())
	resumed = true
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.DeadlineExceeded)
		n, z := rdb.LLen(ctx, queue).Val(), rdb.ZCard(ctx, timeouts).Val()
		assert.Zero(t, n+z, "%d queued, %d timeouts when Acquire returned", n, z)
		assert.Less(t, time.Since(start), 300*time.Millisecond+callTimeout, "bounded by the call timeout")
		t.Logf("returned after %v", time.Since(start))
	case <-time.After(2 * callTimeout):
		t.Fatal("the waiter did not return")
	}
	require.NoError(t, holder.Unlock(ctx))
}

// Refreshed places keep a slot each: when the first of two live waiters
// takes the lock and lets it go at once, the second is still next, ahead of
// a Redisson waiter that joined behind it.
func TestFairRefreshedWaitersKeepTheirOrder(t *testing.T) {
	t.Parallel()
	const watchdog = 3 * time.Second
	_, rdb, rt := setup(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 30*time.Second)
	const name = "fair-refresh-order"
	queue, timeouts := fairKeys(name)
	holder, err := rt.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	var owners []string
	for i := range 2 {
		l := rt.FairLock(name, actorlock.WithOwner(fmt.Sprintf("%s:w%d", rt.ID(), i)))
		owners = append(owners, l.Owner())
		wg.Go(func() {
			h, err := l.Acquire(ctx, actorlock.WaitTime(20*time.Second))
			if assert.NoError(t, err) {
				mu.Lock()
				order = append(order, l.Owner())
				mu.Unlock()
				assert.NoError(t, h.Unlock(ctx))
			}
		})
		require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == int64(i+1) }, 5*time.Second, time.Millisecond)
	}
	// A Redisson waiter joins behind them, as RedissonFairLock does.
	const redisson = "redisson-thread:1"
	last := rdb.ZScore(ctx, timeouts, owners[1]).Val()
	require.NoError(t, rdb.ZAdd(ctx, timeouts, redis.Z{Score: last + float64((20 * time.Second).Milliseconds()), Member: redisson}).Err())
	require.NoError(t, rdb.RPush(ctx, queue, redisson).Err())
	time.Sleep(watchdog / 2) // at least one refresh
	require.NoError(t, holder.Unlock(ctx))
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		assert.Equal(t, owners, order)
	case <-time.After(10 * time.Second):
		q, _ := rdb.LRange(ctx, queue, 0, -1).Result()
		t.Fatalf("a live waiter lost its place: queue %v, served %v", q, order)
	}
	assert.Equal(t, []string{redisson}, rdb.LRange(ctx, queue, 0, -1).Val())
	require.NoError(t, rdb.Del(ctx, queue, timeouts).Err())
}

// A waiter gives up while its holder's unlock, which hands it the lock, is
// in flight (Redis frozen meanwhile): the hand-off is undone when the
// unlock comes back, and the waiter is answered then, not a call timeout
// later; nothing of it stays in Redis.
func TestFairGiveUpWhileAHandOffToItIsInFlight(t *testing.T) {
	t.Parallel()
	const callTimeout = 8 * time.Second
	srv, rdb, rt := setup(t, actorlock.WithCallTimeout(callTimeout))
	ctx := ctxFor(t, 30*time.Second)
	const name = "fair-giveup-handoff"
	queue, timeouts := fairKeys(name)
	holder, err := rt.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	l := rt.FairLock(name, actorlock.WithOwner(rt.ID()+":waiter"))
	errc := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, actorlock.WaitTime(time.Second))
		errc <- err
	}()
	require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 1 }, 900*time.Millisecond, time.Millisecond)
	require.NoError(t, srv.Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	unlocked := make(chan error, 1)
	go func() { unlocked <- holder.Unlock(ctx) }()
	time.Sleep(1500 * time.Millisecond) // the waiter's wait time passes while the unlock is stuck
	require.NoError(t, srv.Resume())
	resumed = true
	resumedAt := time.Now()
	require.NoError(t, <-unlocked)
	select {
	case err := <-errc:
		require.ErrorIs(t, err, actorlock.ErrNotAcquired)
		assert.Less(t, time.Since(resumedAt), callTimeout/2, "answered when the unlock came back")
		t.Logf("answered %v after Redis resumed", time.Since(resumedAt))
	case <-time.After(callTimeout + 2*time.Second):
		t.Fatal("the waiter did not return")
	}
	require.Eventually(t, func() bool {
		return rdb.Exists(ctx, name).Val() == 0 && rdb.LLen(ctx, queue).Val() == 0 && rdb.ZCard(ctx, timeouts).Val() == 0
	}, 5*time.Second, 10*time.Millisecond, "the hand-off undone, no place left")
}

// A Redisson waiter ahead that takes the lock moves every place behind it
// up by its own wait (5 min by default), which puts a refreshed place in
// the past; once pruned, the live waiter joins again at its next refresh
// and gets the free lock within about a third of a lease.
func TestFairLiveWaiterCutByARedissonShiftJoinsAgain(t *testing.T) {
	t.Parallel()
	const watchdog = 3 * time.Second
	_, rdb, rt := setup(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 30*time.Second)
	const name = "fair-redisson-shift"
	queue, timeouts := fairKeys(name)
	// A Redisson thread holds the lock, another waits at the head.
	const holder, next = "redisson-thread:1", "redisson-thread:2"
	require.NoError(t, rdb.HSet(ctx, name, holder, 1).Err())
	require.NoError(t, rdb.PExpire(ctx, name, 20*time.Second).Err())
	now := float64(rdb.Time(ctx).Val().UnixMilli())
	require.NoError(t, rdb.ZAdd(ctx, timeouts, redis.Z{Score: now + 20000 + 300000, Member: next}).Err())
	require.NoError(t, rdb.RPush(ctx, queue, next).Err())

	got := make(chan time.Time, 1)
	done := make(chan error, 1)
	go func() {
		h, err := rt.FairLock(name).Acquire(ctx, actorlock.WaitTime(20*time.Second))
		if err == nil {
			got <- time.Now()
			err = h.Unlock(ctx)
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return rdb.LLen(ctx, queue).Val() == 2 }, 5*time.Second, time.Millisecond)
	time.Sleep(watchdog / 2) // refreshed: about a lease ahead

	// The holder unlocks, the Redisson waiter takes the lock as Redisson's
	// script does (every place moves up by its 5 min wait), and unlocks at
	// once, pruning the place now in the past.
	require.NoError(t, rdb.Del(ctx, name).Err())
	take := `redis.call('lpop', KEYS[2]); redis.call('zrem', KEYS[3], ARGV[1])
for _, k in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do redis.call('zincrby', KEYS[3], -300000, k) end
redis.call('hset', KEYS[1], ARGV[1], 1); redis.call('pexpire', KEYS[1], 30000)
return 1`
	require.NoError(t, rdb.Eval(ctx, take, []string{name, queue, timeouts}, next).Err())
	prune := `local t = redis.call('time'); local now = tonumber(t[1]) * 1000
local head = redis.call('lindex', KEYS[2], 0)
if head and tonumber(redis.call('zscore', KEYS[3], head)) <= now then redis.call('lpop', KEYS[2]); redis.call('zrem', KEYS[3], head) end
redis.call('del', KEYS[1])
return 1`
	require.NoError(t, rdb.Eval(ctx, prune, []string{name, queue, timeouts}).Err())
	unlocked := time.Now()
	require.Zero(t, rdb.LLen(ctx, queue).Val(), "the live waiter's place was pruned")
	select {
	case at := <-got:
		took := at.Sub(unlocked)
		assert.Less(t, took, watchdog, "joined again within about a third of a lease")
		t.Logf("the cut waiter got the free lock %v later", took)
		require.NoError(t, <-done)
	case err := <-done:
		t.Fatalf("the cut waiter did not get the free lock: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("the cut waiter did not get the free lock")
	}
}
