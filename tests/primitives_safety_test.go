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
	"github.com/actorlock/actorlock/primitive"
	"github.com/actorlock/actorlock/scripts"
)

// Issue 33's defects A-D: a request of a queue, semaphore or latch acts
// once, whatever became of its first attempt, and what a pop or an
// acquisition took reaches its caller or goes back. Every call runs under
// its request's duplicate guard (scripts.Guard), the first attempt as much
// as a retry.

// scriptOnKey reports whether c runs a script whose first key is key.
func scriptOnKey(c respCommand, key string) bool {
	keys, _, ok := c.script()
	return ok && len(keys) > 0 && keys[0] == key && !settling(c)
}

// A. A delayed Offer whose first attempt ran (its reply lost) and whose
// retry reaches Redis after the first copy was taken from the delayed
// queue (here: cleared) stores nothing more: the retry finds the request's
// guard. Its delay outlasts the call timeout, which is how long the old
// marker lived when it was written at all. The same for an OfferRequest
// sent again with the same request_id.
func TestDelayedOfferRetryStoresOnce(t *testing.T) {
	t.Parallel()
	p, direct, rt := impatient(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "offer-once"
	zset := scripts.DelayTimeoutKey(name)
	// The offer script on the server first: a NOSCRIPT answer would be the
	// attempt dropped, and it does nothing.
	warm := rt.DelayedQueue("offer-once:warm")
	require.NoError(t, warm.Offer(ctx, []byte("w"), time.Minute))
	require.NoError(t, warm.Close())
	lost := p.on(1, dropReply, 0, func(c respCommand) bool { return scriptOnKey(c, zset) })
	held := p.on(1, holdCommand, time.Second, func(c respCommand) bool { return scriptOnKey(c, zset) })
	q := rt.DelayedQueue(name)
	defer q.Close()
	offered := make(chan error, 1)
	go func() { offered <- q.Offer(ctx, []byte("once"), time.Minute) }()
	await(t, lost.ran, 5*time.Second, "the first attempt ran")
	await(t, held.hits, 5*time.Second, "the retry is held back")
	require.Equal(t, int64(1), direct.ZCard(ctx, zset).Val(), "the first attempt stored the item")
	require.NoError(t, q.Clear(ctx), "the item is taken away before the retry arrives")
	await(t, held.ran, 5*time.Second, "the retry ran")
	require.NoError(t, await(t, offered, 5*time.Second, "the Offer"))
	n, err := q.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "the retry stored nothing more")

	// By message: a request sent again with its request_id (its answer was
	// lost to the sender) after the item was taken offers nothing more.
	sys := actorkit.System(rt)
	sender := spawnProbe(t, sys)
	offer := &messages.OfferRequest{RequestId: "o1", Name: name, Payload: []byte("by message"), DelayMs: 60_000}
	sender.send(sys, actorkit.PID(rt), offer)
	require.Nil(t, receive[*messages.OfferResponse](t, sender, 5*time.Second).GetError())
	require.NoError(t, q.Clear(ctx))
	sender.send(sys, actorkit.PID(rt), offer)
	require.Nil(t, receive[*messages.OfferResponse](t, sender, 5*time.Second).GetError())
	n, err = q.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "the request sent again offered nothing more")
}

// B. A plain semaphore acquisition whose reply comes after the call
// timeout: the permit it took reaches its waiter (still waiting) or goes
// back, never lost. Permits are conserved.
func TestSemaphoreAcquireWhoseReplyIsLateLosesNoPermit(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	direct := client(t, srv.Addr)
	const callTimeout = time.Second
	rt := newRuntime(t, client(t, p.Addr()), actorlock.WithCallTimeout(callTimeout))
	ctx := ctxFor(t, 30*time.Second)
	const name = "permit-late"
	// The scripts on the server first: a NOSCRIPT answer delayed would be
	// an attempt that did nothing.
	warm := rt.Semaphore(name + ":warm")
	_, err := warm.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	_, err = warm.TryAcquire(ctx, 1)
	require.NoError(t, err)
	sem := rt.Semaphore(name)
	ok, err := sem.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	late := p.on(1, delayReply, callTimeout+500*time.Millisecond, func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && len(keys) == 3 && keys[0] == name && len(argv) == 4 && argv[0] == "1" // semaphore_acquire: 1 permit
	})
	// Its outcome unknown at the call timeout, the acquisition is settled:
	// the permit reaches the caller, who still waits, or goes back.
	got, err := sem.TryAcquire(ctx, 1)
	await(t, late.ran, 5*time.Second, "the acquisition ran")
	if err == nil && got {
		require.NoError(t, sem.Release(ctx, 1))
	}
	require.Eventually(t, func() bool { return direct.Get(ctx, name).Val() == "1" }, 5*time.Second, 10*time.Millisecond,
		"the permit is back: held by the caller, then released, or given back (TryAcquire: %v, %v)", got, err)
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, "1", direct.Get(ctx, name).Val(), "once")

	// A caller that gave up (its ctx ended at the call timeout) is gone:
	// the permit goes back.
	late = p.on(1, delayReply, callTimeout+500*time.Millisecond, func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && len(keys) == 3 && keys[0] == name && len(argv) == 4 && argv[0] == "1"
	})
	short, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err = sem.TryAcquire(short, 1)
	require.Error(t, err, "the caller stopped waiting")
	await(t, late.ran, 5*time.Second, "the acquisition ran")
	require.Eventually(t, func() bool { return direct.Get(ctx, name).Val() == "1" }, 5*time.Second, 10*time.Millisecond,
		"the permit the acquisition took goes back")
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, "1", direct.Get(ctx, name).Val(), "once")
}

// C. A Take whose reply is lost loses no item: the item moved into the
// take's hold goes back to the head of the queue (go-redis's replay of a
// blocking pop used to take a second item while the first vanished).
func TestTakeWhoseReplyIsLostLosesNoItem(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "take-lost"
	q := rt.BlockingQueue(name)
	require.NoError(t, q.Offer(ctx, []byte("first")))
	require.NoError(t, q.Offer(ctx, []byte("second")))
	// Every try's reply lost: go-redis replays a blocking pop whose
	// connection broke, and gives up after its retries.
	lost := p.on(10, dropReply, 0, func(c respCommand) bool {
		verb := strings.ToUpper(c[0])
		return (verb == "BLMOVE" || verb == "LMOVE" || verb == "BLPOP" || verb == "LPOP") && len(c) > 1 && c[1] == name
	})
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := q.Take(tctx)
	await(t, lost.ran, 5*time.Second, "the pop ran")
	p.stop(lost)
	taken := takenAndLeft(t, ctx, q, v, err)
	assert.ElementsMatch(t, []string{"first", "second"}, taken, "every item reaches a taker or is still in the queue")
	assert.Zero(t, direct.Exists(ctx, name).Val())
	keys, err := direct.Keys(ctx, "actorlock_request:{"+name+"}:*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		// The Offers' guards are strings; a hold would be a list.
		assert.Equal(t, "string", direct.Type(ctx, k).Val(), "no hold left: %s", k)
	}
}

// D. A first attempt that reaches Redis after its own retry (held back on
// its connection while the retry went out on another), later than the call
// timeout (how long the old markers lived), applies nothing more: a
// semaphore Release(1) gives one permit, a CountDown counts once, a
// blocking queue's Offer pushes once.
func TestLateFirstAttemptsOfPrimitivesApplyOnce(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	direct := client(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	const callTimeout = time.Second
	rt := newRuntime(t, rdb, actorlock.WithCallTimeout(callTimeout))
	ctx := ctxFor(t, 30*time.Second)
	const holdBack = 2 * callTimeout
	for _, c := range []struct {
		what, name string
		prepare    func()
		act        func() error
		check      func(t *testing.T)
	}{
		{"release", "late-release", func() {
			ok, err := rt.Semaphore("late-release").TrySetPermits(ctx, 0)
			require.NoError(t, err)
			require.True(t, ok)
		}, func() error { return rt.Semaphore("late-release").Release(ctx, 1) }, func(t *testing.T) {
			assert.Equal(t, "1", direct.Get(ctx, "late-release").Val(), "Release(1) gives one permit")
		}},
		{"count down", "late-count-down", func() {
			ok, err := rt.CountDownLatch("late-count-down").TrySetCount(ctx, 3)
			require.NoError(t, err)
			require.True(t, ok)
		}, func() error { return rt.CountDownLatch("late-count-down").CountDown(ctx) }, func(t *testing.T) {
			assert.Equal(t, "2", direct.Get(ctx, "late-count-down").Val(), "one CountDown counts once")
		}},
		{"offer", "late-offer", func() {}, func() error { return rt.BlockingQueue("late-offer").Offer(ctx, []byte("x")) }, func(t *testing.T) {
			assert.Equal(t, []string{"x"}, direct.LRange(ctx, "late-offer", 0, -1).Val(), "one Offer pushes once")
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			c.prepare()
			require.NoError(t, c.act(), "once, to have the script on the server")
			require.NoError(t, direct.Del(ctx, c.name).Err())
			c.prepare()
			held := p.on(1, holdCommand, holdBack, func(cmd respCommand) bool { return scriptOnKey(cmd, c.name) })
			require.NoError(t, c.act(), "the retry went through")
			await(t, held.ran, 5*time.Second, "the first attempt reached Redis, after its retry")
			c.check(t)
		})
	}
}

// takenAndLeft is the item of a Take that returned (v, err), if any, then
// every item still in q, drained by Poll.
func takenAndLeft(t *testing.T, ctx context.Context, q *primitive.BlockingQueue, v []byte, err error) []string {
	t.Helper()
	var out []string
	if err == nil {
		out = append(out, string(v))
	}
	for {
		v, ok, err := q.Poll(ctx)
		require.NoError(t, err)
		if !ok {
			return out
		}
		out = append(out, string(v))
	}
}
