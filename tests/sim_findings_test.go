package tests

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/scripts"
)

// Findings of the simulation's primitives workload (tests/sim,
// primfindings_test.go, findings P to U), each reproduced here on a real
// redis-server with the RESP proxy holding back or dropping the command
// that matters.

// refusingClient is a client of p whose dials fail while refusing is set, as
// a Redis that cannot be reached for a moment makes them fail; with one
// connection, a call after a dropped one must dial.
func refusingClient(t *testing.T, p *respProxy, readTimeout time.Duration) (*redis.Client, *atomic.Bool) {
	t.Helper()
	refusing := &atomic.Bool{}
	rdb := redis.NewClient(&redis.Options{
		Addr: p.Addr(), PoolSize: 1, ReadTimeout: readTimeout, DialerRetries: 1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if refusing.Load() {
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connect: connection refused")}
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, refusing
}

// itemBack waits until queue holds want items (the item a faulted pop
// took is back), and fails naming where the item is otherwise.
func itemBack(t *testing.T, ctx context.Context, direct *redis.Client, queue string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for direct.LLen(ctx, queue).Val() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	var held []string
	for _, k := range direct.Keys(ctx, scripts.RequestKey(queue, "*")).Val() {
		if direct.Type(ctx, k).Val() == "list" {
			held = append(held, k+" "+direct.LIndex(ctx, k, 0).Val())
		}
	}
	assert.Equal(t, int64(1), direct.LLen(ctx, queue).Val(), "the item is back in the queue; pops' holds that keep items from every taker: %v", held)
	assert.Empty(t, held, "no item stays in a pop's hold")
}

// Finding P: a Poll whose reply is lost (the connection breaks after LMOVE
// ran) ends its hold with queue_taken, giving the item back; when Redis
// cannot be reached for that moment (a dial fails), the hold is never
// ended: the item stays in actorlock_request:{queue}:<id>, where no taker
// gets it. (A pop whose reply came back and whose hold cannot be ended
// leaves the item both with its caller and in Redis.)
func TestPopWhoseHoldCannotBeEndedAtOnceGivesTheItemBack(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	rdb, refusing := refusingClient(t, p, time.Second)
	rt := newRuntime(t, rdb)
	direct := client(t, srv.Addr)
	ctx := ctxFor(t, 30*time.Second)
	const name = "finding-p"
	q := rt.BlockingQueue(name)
	require.NoError(t, q.Offer(ctx, []byte("warm")))
	_, _, err := q.Poll(ctx)
	require.NoError(t, err, "the scripts are loaded, the one connection is up")

	require.NoError(t, direct.RPush(ctx, name, "x").Err())
	drop := p.on(1, dropReply, 0, func(c respCommand) bool { return c.name() == "LMOVE" })
	refusing.Store(true) // the next dial fails: the one after the dropped LMOVE
	_, ok, err := q.Poll(ctx)
	await(t, drop.ran, 5*time.Second, "the LMOVE")
	require.Error(t, err, "the Poll's reply was lost")
	require.False(t, ok)
	time.Sleep(300 * time.Millisecond)
	refusing.Store(false) // Redis is reachable again
	itemBack(t, ctx, direct, name, 5*time.Second)
}

// Finding Q: a Poll's LMOVE held back on its connection past the client's
// read timeout fails to the runtime, which ends the (empty) hold; when the
// LMOVE then reaches Redis, it moves the head into that hold, which nobody
// ends: the item is kept from every taker.
func TestPopReachingRedisAfterItsHoldEndedStrandsNothing(t *testing.T) {
	t.Parallel()
	p, direct, rt := impatient(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "finding-q"
	q := rt.BlockingQueue(name)
	require.NoError(t, q.Offer(ctx, []byte("warm")))
	_, _, err := q.Poll(ctx)
	require.NoError(t, err)

	require.NoError(t, direct.RPush(ctx, name, "x").Err())
	late := p.on(1, holdCommand, time.Second, func(c respCommand) bool { return c.name() == "LMOVE" })
	_, ok, err := q.Poll(ctx)
	require.Error(t, err, "the Poll timed out")
	require.False(t, ok)
	await(t, late.ran, 5*time.Second, "the late LMOVE")
	itemBack(t, ctx, direct, name, 3*time.Second)
}

// Finding S: a Take's BLMOVE whose connection breaks after it ran (its reply
// lost) is replayed by go-redis on a new connection; the replay finds the
// queue empty and times out with nothing, so the runtime does not end the
// first BLMOVE's hold: the item in it is kept from every taker, the Take
// included.
func TestReplayedBlockingPopThatFindsNothingLosesNoItem(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "finding-s"
	q := rt.BlockingQueue(name)
	require.NoError(t, q.Offer(ctx, []byte("warm")))
	_, err := q.Take(ctx)
	require.NoError(t, err)

	require.NoError(t, direct.RPush(ctx, name, "x").Err())
	drop := p.on(1, dropReply, 0, func(c respCommand) bool { return c.name() == "BLMOVE" })
	tctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	v, err := q.Take(tctx)
	cancel()
	await(t, drop.ran, time.Second, "the BLMOVE")
	if err == nil {
		assert.Equal(t, "x", string(v), "the Take got the item")
		return
	}
	itemBack(t, ctx, direct, name, 3*time.Second)
}

// Finding T: a permit-expirable semaphore's acquire script runs under no
// duplicate guard (it is idempotent by its permit ids while they are held):
// a first attempt held back past the read timeout while its retry took the
// permit reaches Redis after the caller released it, and takes it again,
// for nobody (without a lease, for ever).
func TestLateExpirableAcquireAttemptTakesNoPermitForNobody(t *testing.T) {
	t.Parallel()
	p, direct, rt := impatient(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "finding-t"
	sem := rt.PermitExpirableSemaphore(name)
	ok, err := sem.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	id, err := sem.Acquire(ctx, 0)
	require.NoError(t, err, "the scripts are loaded")
	require.NoError(t, sem.Release(ctx, id))

	late := p.on(1, holdCommand, time.Second, func(c respCommand) bool {
		keys, _, ok := c.script()
		return ok && len(keys) == 3 && keys[0] == name // the acquire (a release has its guard's keys too)
	})
	id, err = sem.Acquire(ctx, 0)
	require.NoError(t, err, "the retry took the permit")
	require.NoError(t, sem.Release(ctx, id))
	await(t, late.ran, 5*time.Second, "the first attempt")
	assert.Zero(t, direct.ZCard(ctx, scripts.PermitTimeoutKey(name)).Val(), "no permit is recorded for nobody")
	assert.Equal(t, "1", direct.Get(ctx, name).Val(), "the permit is available")
}

// Finding R: an item a Take won after its caller gave up is given back to
// the head of the queue by the runtime; when that give-back's connection
// breaks before it is sent and Redis cannot be reached for a moment (the
// re-attempt's dial fails), the give-back is dropped and the item lost.
func TestGiveBackOfAnItemNobodyTookOutlivesARefusedConnection(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	rdb, refusing := refusingClient(t, p, 3*time.Second)
	rt := newRuntime(t, rdb)
	direct := client(t, srv.Addr)
	ctx := ctxFor(t, 30*time.Second)
	const name = "finding-r"
	q := rt.BlockingQueue(name)
	require.NoError(t, q.Offer(ctx, []byte("warm")))
	_, err := q.Take(ctx)
	require.NoError(t, err)

	require.NoError(t, direct.RPush(ctx, name, "x").Err())
	p.on(1, delayReply, 500*time.Millisecond, func(c respCommand) bool { return c.name() == "BLMOVE" })
	refused := p.on(1, refuse, 0, func(c respCommand) bool {
		return c.scriptOn(name) && c.name() != "BLMOVE" && len(c) > 4 && c[len(c)-4] == "x"
	})
	refusing.Store(true) // the give-back's re-attempt must dial
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = q.Take(tctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the Take gave up before its item came")
	await(t, refused.hits, 5*time.Second, "the give-back")
	time.Sleep(300 * time.Millisecond)
	refusing.Store(false)
	itemBack(t, ctx, direct, name, 5*time.Second)
}

// Finding U: a latch's awaiters are released by a read of the count that
// began before the count was set again (or by the "0" of the latch's last
// round, delivered late): an Await that started after TrySetCount returned
// nil while the count never left 5. Redisson's await re-reads the count
// after every release and waits on while it is above zero.
func TestLatchAwaitIgnoresAZeroFromBeforeTheCountWasSet(t *testing.T) {
	t.Parallel()
	p, _, rt := proxied(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "finding-u"
	l := rt.CountDownLatch(name)
	slow := p.on(1, delayReply, time.Second, func(c respCommand) bool { return c.name() == "GET" && len(c) > 1 && c[1] == name })
	first := make(chan error, 1)
	go func() { first <- l.Await(ctx) }() // the count is zero: it reads it (slowly) and returns
	await(t, slow.ran, 5*time.Second, "the first awaiter's read")
	ok, err := l.TrySetCount(ctx, 5)
	require.NoError(t, err)
	require.True(t, ok)
	bctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	err = l.Await(bctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "an Await that began with the count at 5 waits while it is 5")
	require.NoError(t, await(t, first, 5*time.Second, "the first awaiter"))
	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(5), n)
}
