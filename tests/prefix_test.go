package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// docs/security.md's prefix-narrowed ACL user runs every primitive when the code
// names objects without the prefix and the runtime adds it
// (WithKeyPrefix); a runtime without the prefix is refused.
func TestKeyPrefixWithTheNarrowedACLUser(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	admin := adminClient(t, srv)
	password := secret("pw-")
	createACLUser(t, admin, "app", password, []string{"~*", "&redisson_*"}, strings.Fields(aclPrefixRules)...)
	ctx := ctxFor(t, time.Minute)
	dial := func() *redis.Client { return urlClient(t, "redis", srv.Addr, "app", password, nil) }
	runPrimitives(t, dial, admin, "", actorlock.WithKeyPrefix("app:"))
	assert.Empty(t, aclLog(t, ctx, admin), "nothing refused")
	keys, err := admin.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		assert.Contains(t, k, "app:", "key %q outside the prefix", k)
	}

	rt := newRuntime(t, dial())
	_, err = rt.Lock("lock").TryAcquire(ctx)
	require.Error(t, err)
	assert.True(t, deniedByACL(err.Error()), "%v", err)
}

// With WithKeyPrefix("app:"), every key and channel is the one Redisson
// derives from "app:<name>" (its NameMapper adding the same prefix), so a
// runtime without the prefix naming "app:<name>", or a Redisson client,
// meets the same objects.
func TestKeyPrefixRedissonLayout(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, time.Minute)
	rtP := newRuntime(t, client(t, srv.Addr), actorlock.WithKeyPrefix("app:"))
	rt0 := newRuntime(t, client(t, srv.Addr))

	// Reentrant lock: hash, fencing counter, unlock channel.
	l := rtP.Lock("orders:42")
	assert.Equal(t, "app:orders:42", l.Name())
	h, err := l.Acquire(ctx)
	require.NoError(t, err)
	count, err := rdb.HGet(ctx, "app:orders:42", h.Owner()).Result()
	require.NoError(t, err)
	assert.Equal(t, "1", count)
	n, err := rdb.Exists(ctx, "orders:42", "redisson_lock_token:{orders:42}").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing under the unmapped name")
	token, err := rdb.Get(ctx, "redisson_lock_token:{app:orders:42}").Int64()
	require.NoError(t, err)
	assert.Equal(t, h.Token(), token)
	_, err = rt0.Lock("app:orders:42").TryAcquire(ctx)
	require.ErrorIs(t, err, actorlock.ErrNotAcquired, "the unprefixed runtime sees the same lock")

	// A Redisson client waiting on the mapped channel hears the unlock, and
	// so does the unprefixed runtime's waiter.
	sub := rdb.Subscribe(ctx, "redisson_lock__channel:{app:orders:42}")
	t.Cleanup(func() { _ = sub.Close() })
	_, err = sub.Receive(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		h0, err := rt0.Lock("app:orders:42").Acquire(ctx, actorlock.WaitTime(20*time.Second))
		if err == nil {
			err = h0.Unlock(context.WithoutCancel(ctx))
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		n, err := rdb.PubSubNumSub(ctx, "redisson_lock__channel:{app:orders:42}").Result()
		return err == nil && n["redisson_lock__channel:{app:orders:42}"] == 2
	}, 10*time.Second, 5*time.Millisecond, "the waiter subscribes to the mapped channel")
	unlocked := time.Now()
	require.NoError(t, h.Unlock(ctx))
	msg, err := sub.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Equal(t, "0", msg.Payload)
	require.NoError(t, <-got)
	assert.Less(t, time.Since(unlocked), 5*time.Second, "woken by the unlock message")

	// Fair lock: queue and timeout keys of the mapped name.
	fair, err := rtP.FairLock("jobs").Acquire(ctx)
	require.NoError(t, err)
	waiter := make(chan error, 1)
	go func() {
		_, err := rtP.FairLock("jobs").Acquire(ctx, actorlock.WaitTime(300*time.Millisecond))
		waiter <- err
	}()
	require.Eventually(t, func() bool {
		n, err := rdb.ZCard(ctx, "redisson_lock_timeout:{app:jobs}").Result()
		return err == nil && n == 1
	}, 10*time.Second, 5*time.Millisecond, "the waiter queues under the mapped name")
	require.ErrorIs(t, <-waiter, actorlock.ErrNotAcquired)
	require.NoError(t, fair.Unlock(ctx))

	// Read-write lock: mode and the per-read-hold key.
	rw := rtP.ReadWriteLock("config")
	r, err := rw.ReadLocker().Acquire(ctx)
	require.NoError(t, err)
	mode, err := rdb.HGet(ctx, "app:config", "mode").Result()
	require.NoError(t, err)
	assert.Equal(t, "read", mode)
	n, err = rdb.Exists(ctx, "{app:config}:"+r.Owner()+":rwlock_timeout:1").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	require.NoError(t, r.Unlock(ctx))

	// Semaphore, latch, delayed queue into its list.
	_, err = rtP.Semaphore("pool").TrySetPermits(ctx, 3)
	require.NoError(t, err)
	permits, err := rdb.Get(ctx, "app:pool").Result()
	require.NoError(t, err)
	assert.Equal(t, "3", permits)
	_, err = rtP.CountDownLatch("boot").TrySetCount(ctx, 2)
	require.NoError(t, err)
	latch, err := rdb.Get(ctx, "app:boot").Result()
	require.NoError(t, err)
	assert.Equal(t, "2", latch)
	q := rtP.DelayedQueue("work")
	t.Cleanup(func() { _ = q.Close() })
	require.NoError(t, q.Offer(ctx, []byte("job"), 500*time.Millisecond))
	n, err = rdb.ZCard(ctx, "redisson_delay_queue_timeout:{app:work}").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	item, err := rt0.BlockingQueue("app:work").Take(ctx)
	require.NoError(t, err)
	assert.Equal(t, "job", string(item))

	// The prefix never makes an empty name valid; an empty prefix is refused.
	_, err = rtP.Lock("").TryAcquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	_, err = rtP.Semaphore("").Available(ctx)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	_, err = actorlock.New(rdb, actorlock.WithKeyPrefix(""))
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)

	// A prefix with a hash tag puts every name's keys in its slot.
	rtT := newRuntime(t, client(t, srv.Addr), actorlock.WithKeyPrefix("{tenant1}:"))
	ht, err := rtT.Lock("a").Acquire(ctx)
	require.NoError(t, err)
	n, err = rdb.Exists(ctx, "{tenant1}:a", "redisson_lock_token:{tenant1}:a").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	require.NoError(t, ht.Unlock(ctx))
}

// The key prefix maps the names of protocol requests too: an actor asking
// by message for "orders:7" meets the same lock, and the same semaphore, as
// the runtime's Go handles with that name, and a LockLost names the lock as
// the owner asked for it.
func TestKeyPrefixMapsMessageNames(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	rt := newRuntime(t, client(t, srv.Addr), actorlock.WithKeyPrefix("app:"))
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)
	req := &messages.AcquireRequest{RequestId: "a", Name: "orders:7", Kind: messages.Kind_KIND_LOCK}
	p.send(sys, actorkit.PID(rt), req)
	got := receive[*messages.AcquireResponse](t, p, 5*time.Second)
	require.True(t, got.Acquired, "%v", got.GetError())
	assert.Equal(t, "orders:7", req.Name, "the sender's message is left as it was")
	assert.Equal(t, map[string]string{got.Owner: "1"}, ownersOf(rdb.HGetAll(ctx, "app:orders:7").Val()))
	_, err := rt.Lock("orders:7").TryAcquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrNotAcquired, "the Go handle of that name meets the same lock")

	// Another owner takes it behind the holder's back: its release finds it
	// lost.
	require.NoError(t, rdb.Del(ctx, "app:orders:7").Err())
	require.NoError(t, rdb.HSet(ctx, "app:orders:7", "someone-else:1", 1).Err())
	p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "r", Name: "orders:7", Kind: messages.Kind_KIND_LOCK, OwnerToken: got.OwnerToken})
	// The owner hears of the loss, then gets the release's answer.
	lost := receive[*messages.LockLost](t, p, 5*time.Second)
	assert.Equal(t, "orders:7", lost.Name, "named as the owner asked")
	rel := receive[*messages.ReleaseResponse](t, p, 5*time.Second)
	assert.NotNil(t, rel.GetError(), "the hold was lost to someone else")

	s := rt.Semaphore("pool")
	ok, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	p.send(sys, actorkit.PID(rt), &messages.SemaphoreAcquireRequest{RequestId: "s", Name: "pool", Permits: 1})
	sem := receive[*messages.SemaphoreAcquireResponse](t, p, 5*time.Second)
	require.True(t, sem.Acquired, "%v", sem.GetError())
	assert.Equal(t, "0", rdb.Get(ctx, "app:pool").Val(), "the message took the Go handle's permit")
}
