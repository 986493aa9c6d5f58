package tests

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/scripts"
)

func TestReentrancyHoldCountsAndRelease(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 10*time.Second)
		mine, other := rt.Lock("orders:42"), rt.Lock("orders:42")

		counts := []int{}
		var as context.Context = ctx // the owner whose holds are counted
		count := func() {
			n, err := mine.HoldCount(as)
			require.NoError(t, err)
			counts = append(counts, n)
		}
		count()
		h1, err := mine.Acquire(ctx)
		require.NoError(t, err)
		// Keep h1's owner but not its end, to count after the last unlock.
		as = context.WithoutCancel(h1.Context())
		count()
		h2, err := mine.Acquire(h1.Context())
		require.NoError(t, err, "an acquisition with the hold's context re-enters")
		assert.Equal(t, h1.Owner(), h2.Owner())
		count()
		require.NoError(t, h2.Unlock(ctx))
		count()

		_, err = other.TryAcquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrNotAcquired, "another owner must not get a lock held once more")

		require.NoError(t, h1.Unlock(ctx))
		count()
		assert.Equal(t, []int{0, 1, 2, 1, 0}, counts)
		exists, err := rdb.Exists(ctx, "orders:42").Result()
		require.NoError(t, err)
		assert.Zero(t, exists, "the key is gone when the hold count reaches 0")

		h3, err := other.TryAcquire(ctx)
		require.NoError(t, err, "free after the last unlock")
		require.NoError(t, h3.Unlock(ctx))
	})
}

func TestSharedOwnerReentersAcrossHandles(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		_, rt := d.setup(t)
		ctx := ctxFor(t, 10*time.Second)
		a := rt.Lock("shared", actorlock.WithOwner("request-7"))
		b := rt.Lock("shared", actorlock.WithOwner("request-7"))
		ha, err := a.Acquire(ctx)
		require.NoError(t, err)
		hb, err := b.TryAcquire(ctx)
		require.NoError(t, err, "a handle with the same owner re-enters")
		n, err := b.HoldCount(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		require.NoError(t, ha.Unlock(ctx))
		require.NoError(t, hb.Unlock(ctx))
	})
}

func TestRedisDataLayoutIsRedissons(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t, actorlock.WithWatchdog(2*time.Second))
		ctx := ctxFor(t, 10*time.Second)
		l := rt.Lock("orders:42")

		h, err := l.Acquire(ctx)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(h.Owner(), rt.ID()+":"), "owner ids are <runtime uuid>:<n> like Redisson's <uuid>:<thread>")
		fields, err := rdb.HGetAll(ctx, "orders:42").Result()
		require.NoError(t, err)
		assert.Equal(t, map[string]string{h.Owner(): "1", scripts.HoldMarkField: strconv.FormatInt(h.Token(), 10)}, fields,
			"lock = HASH name, field owner = hold count, and the holds' mark: the token of the grant that began them")
		pttl, err := rdb.PTTL(ctx, "orders:42").Result()
		require.NoError(t, err)
		assert.InDelta(t, 2*time.Second, pttl, float64(700*time.Millisecond), "PX = watchdog lease")
		token, err := rdb.Get(ctx, "redisson_lock_token:{orders:42}").Int64()
		require.NoError(t, err)
		assert.Equal(t, h.Token(), token, "fencing counter in redisson_lock_token:{name}")

		// A waiter in another process (here: runtime) subscribes to Redisson's
		// channel; one in this runtime would be handed the lock directly.
		other := newRuntime(t, d.client(t))
		waiter := make(chan error, 1)
		go func() {
			h2, err := other.Lock("orders:42").Acquire(ctx)
			if err == nil {
				err = h2.Unlock(ctx)
			}
			waiter <- err
		}()
		require.Eventually(t, func() bool {
			return d.subscribers(t, ctx, "redisson_lock__channel:{orders:42}") == 1
		}, 2*time.Second, 5*time.Millisecond)

		// Every script that changes the lock leaves its request's guard,
		// actorlock's own expiring key holding its reply, beside Redisson's
		// layout; the name's next script deletes it once its one attempt
		// was answered. After the re-entry and its unlock, the unlock's is
		// left: "0", still held.
		inner, err := l.Acquire(h.Context())
		require.NoError(t, err)
		require.NoError(t, inner.Unlock(ctx))
		guards := d.keys(t, ctx, "actorlock_request:{orders:42}:"+rt.ID()+":*")
		require.Len(t, guards, 1, "the inner unlock's guard (the waiter's refused attempt has one of its own)")
		v, err := rdb.Get(ctx, guards[0]).Result()
		require.NoError(t, err)
		assert.Equal(t, "0", v)
		ttl, err := rdb.PTTL(ctx, guards[0]).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "the guard expires")
		assert.Empty(t, d.keys(t, ctx, "redisson_unlock_latch:*"), "Redisson's unlock latches are Redisson's own")

		require.NoError(t, h.Unlock(ctx))
		require.NoError(t, <-waiter)
	})
}

func TestBraceNamesKeepOneHashSlot(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 10*time.Second)
		h, err := rt.Lock("{test}:abc:key").Acquire(ctx)
		require.NoError(t, err)
		n, err := rdb.Exists(ctx, "redisson_lock_token:{test}:abc:key").Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "a name with braces is used as is after the prefix, as Redisson does")
		require.NoError(t, h.Unlock(ctx))
	})
}

// A Redisson client is emulated with the plain commands its lock and unlock
// perform on the shared layout.
func TestInteropWithARedissonHolder(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 10*time.Second)
		const name, javaOwner = "inventory:7", "8743c9c0-0795-4907-87fd-6c719a6b4586:1"

		// Redisson thread takes the lock.
		require.NoError(t, rdb.HIncrBy(ctx, name, javaOwner, 1).Err())
		require.NoError(t, rdb.PExpire(ctx, name, 30*time.Second).Err())

		_, err := rt.Lock(name).TryAcquire(ctx)
		require.ErrorIs(t, err, actorlock.ErrNotAcquired, "we see Redisson's lock")

		// We can act as that Redisson thread: re-entry counts on its hold.
		as := rt.Lock(name, actorlock.WithOwner(javaOwner))
		h, err := as.TryAcquire(ctx)
		require.NoError(t, err)
		n, err := as.HoldCount(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		require.NoError(t, h.Unlock(ctx))
		n, err = as.HoldCount(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "our unlock leaves the Java thread's own hold")

		// A waiter of ours wakes on Redisson's unlock message.
		got := make(chan time.Time, 1)
		go func() {
			h, err := rt.Lock(name).Acquire(ctx, actorlock.WaitTime(5*time.Second))
			if err == nil {
				got <- time.Now()
				_ = h.Unlock(ctx)
			}
			close(got)
		}()
		time.Sleep(200 * time.Millisecond)
		released := time.Now()
		require.NoError(t, rdb.Del(ctx, name).Err())
		channel := "redisson_lock__channel:{" + name + "}"
		if d.cluster != nil {
			// Redisson on a Redis 7 cluster publishes sharded, as we do.
			require.NoError(t, rdb.SPublish(ctx, channel, "0").Err())
		} else {
			require.NoError(t, rdb.Publish(ctx, channel, "0").Err())
		}
		at, ok := <-got
		require.True(t, ok, "our waiter acquired after Redisson's unlock")
		assert.Less(t, at.Sub(released), 500*time.Millisecond, "woken by the message, not by the 30 s TTL")

		// Redisson sees our hold as a hash field of the owner.
		h2, err := rt.Lock(name).Acquire(ctx)
		require.NoError(t, err)
		ok2, err := rdb.HExists(ctx, name, h2.Owner()).Result()
		require.NoError(t, err)
		assert.True(t, ok2)
		require.NoError(t, h2.Unlock(ctx))
	})
}

func TestFencingTokensIncreaseIncludingReentry(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 20*time.Second)
		l := rt.Lock("fenced")
		var last int64
		for i := range 20 {
			h, err := l.Acquire(ctx)
			require.NoError(t, err)
			assert.Greater(t, h.Token(), last, "acquisition %d", i)
			last = h.Token()
			if i%2 == 0 {
				h2, err := l.Acquire(h.Context())
				require.NoError(t, err)
				assert.Greater(t, h2.Token(), last, "re-entry gets a new token")
				last = h2.Token()
				require.NoError(t, h2.Unlock(ctx))
			}
			require.NoError(t, h.Unlock(ctx))
		}

		// The counter expires or is lost (restart without persistence): new
		// tokens are seeded from the server clock and keep increasing.
		require.NoError(t, d.restart(t, "fenced"))
		require.Eventually(t, func() bool { return rdb.Ping(ctx).Err() == nil }, 5*time.Second, 10*time.Millisecond)
		require.Eventually(t, func() bool {
			h, err := l.Acquire(ctx, actorlock.WaitTime(time.Second))
			if err != nil {
				return false
			}
			defer h.Unlock(ctx)
			assert.Greater(t, h.Token(), last, "tokens survive a lost counter")
			return true
		}, 10*time.Second, 50*time.Millisecond)
	})
}

func TestForceUnlockIsLockedRemainTTL(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		_, rt := d.setup(t, actorlock.WithWatchdog(5*time.Second))
		ctx := ctxFor(t, 10*time.Second)
		l := rt.Lock("forced")

		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked)
		ttl, err := l.RemainTTL(ctx)
		require.NoError(t, err)
		assert.Zero(t, ttl)

		h, err := l.Acquire(ctx, actorlock.LeaseTime(3*time.Second))
		require.NoError(t, err)
		assert.Equal(t, 3*time.Second, h.Lease())
		locked, err = l.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)
		ttl, err = l.RemainTTL(ctx)
		require.NoError(t, err)
		assert.InDelta(t, 3*time.Second, ttl, float64(300*time.Millisecond))

		was, err := rt.Lock("forced").ForceUnlock(ctx)
		require.NoError(t, err)
		assert.True(t, was)
		select {
		case <-h.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("a force-unlocked hold must end")
		}
		assert.ErrorIs(t, h.Err(), actorlock.ErrLost)
		err = h.Unlock(ctx)
		assert.ErrorIs(t, err, actorlock.ErrLost)
		was, err = l.ForceUnlock(ctx)
		require.NoError(t, err)
		assert.False(t, was)
	})
}

func TestReleaseByNonOwnerIsRefused(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 15*time.Second)

		// A Held whose lease expired, while another owner now holds the lock.
		stale, err := rt.Lock("contested").Acquire(ctx, actorlock.LeaseTime(300*time.Millisecond))
		require.NoError(t, err)
		other := rt.Lock("contested")
		current, err := other.Acquire(ctx, actorlock.WaitTime(3*time.Second))
		require.NoError(t, err)
		err = stale.Unlock(ctx)
		require.Error(t, err)
		assert.True(t, errors.Is(err, actorlock.ErrLost) || errors.Is(err, actorlock.ErrNotOwner), "got %v", err)

		fields, err := rdb.HGetAll(ctx, "contested").Result()
		require.NoError(t, err)
		assert.Equal(t, map[string]string{current.Owner(): "1"}, ownersOf(fields), "the current holder is untouched")
		select {
		case <-current.Done():
			t.Fatal("the current holder must keep its lock")
		default:
		}
		require.NoError(t, current.Unlock(ctx))
	})
}
