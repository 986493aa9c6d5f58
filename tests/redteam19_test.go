package tests

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
)

// The nineteenth red-team pass, over 376376c: scripts.Batched no longer
// sends a queued call whose ctx ended while it waited for a flight.

// cancelGate holds back the Go callers' cancels of the chosen types (by
// %T) on their way to the runtime's actors, until open: the window in
// which a grant reaches its request just before the request's cancel (the
// race core.Ask's giveBack exists for) is made as wide as a test needs,
// instead of hoping the scheduler hits it. seen tells of each one held.
type cancelGate struct {
	seen chan string
	open chan struct{}
	once sync.Once
}

func (g *cancelGate) release() { g.once.Do(func() { close(g.open) }) }

// gatedSystem is an actor system whose root context holds back the
// messages of types (their %T) at the gate.
func gatedSystem(t *testing.T, types ...string) (*actor.ActorSystem, *cancelGate) {
	t.Helper()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	g := &cancelGate{seen: make(chan string, 16), open: make(chan struct{})}
	t.Cleanup(g.release) // before the runtime's Close (cleanups run last first)
	sys.Root = actor.NewRootContext(sys, nil, func(next actor.SenderFunc) actor.SenderFunc {
		return func(c actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
			if name := fmt.Sprintf("%T", env.Message); slices.Contains(types, name) {
				g.seen <- name
				<-g.open
			}
			next(c, target, env)
		}
	})
	return sys, g
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logged is a logger writing to a buffer the test reads.
func logged() (actorlock.Option, *syncBuffer) {
	buf := &syncBuffer{}
	return actorlock.WithLogger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))), buf
}

// sent counts the script calls on name that reach the proxy (it acts on
// none of them).
func sent(p *respProxy, name string) func() int {
	var mu sync.Mutex
	n := 0
	p.on(1000, delayReply, 0, func(c respCommand) bool {
		if c.scriptOn(name) {
			mu.Lock()
			n++
			mu.Unlock()
		}
		return false
	})
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// occupyFlights puts every flight of rt's batching client on the wire
// (actors.pipelineFlights: 4) with a semaphore Release on name each, whose
// commands the proxy holds back for hold before Redis sees them, as
// CLIENT PAUSE WRITE or a slow network would: a script call made
// meanwhile queues in the batching client until one lands.
func occupyFlights(t *testing.T, ctx context.Context, p *respProxy, rt *actorlock.Runtime, name string, hold time.Duration) <-chan error {
	t.Helper()
	const flights = 4
	held := p.on(flights, holdCommand, hold, func(c respCommand) bool { return c.scriptOn(name) })
	landed := make(chan error, flights)
	for range flights {
		go func() { landed <- rt.Semaphore(name).Release(ctx, 1) }()
	}
	for range flights {
		await(t, held.hits, 5*time.Second, "a flight held")
	}
	return landed
}

// RT19-1 (safety: a permit, an item lost). A Go caller whose Acquire or
// Take is cancelled as its grant arrives gives back what it won
// (core.Ask's giveBack: actors.Handle.GiveBackPermits, GiveBackItem),
// bounded by one call timeout (Handle.detached) and never carried through
// or settled: unlike the actor's own give-backs (undoAcquire, giveBack:
// carryThrough), a failure is only logged. Before 376376c such a give-back
// that queued in the batching client behind four busy flights still left
// when one landed, and acted as long as its deadline in Redis allowed (a
// call timeout and a half). Now a call whose ctx ended while it queued is
// never sent, so a give-back that queues for longer than a call timeout
// (every flight held 1.3 s here, a call timeout of 1 s) never reaches
// Redis: the permit, or the item, is lost for good. A Redis that holds the
// give-back itself past its deadline, or refuses it four times in a call
// timeout, loses it the same way. (docs/guarantees.md,
// "Nothing is stranded": "A cancelled Take or Acquire gives back what it
// won the race for"; no permit or item is ever lost under pauses.)
func TestRedTeam19WonRaceGiveBackQueuedPastItsCallTimeoutIsLost(t *testing.T) {
	t.Parallel()
	const ct, hold = time.Second, 1300 * time.Millisecond
	t.Run("permit", func(t *testing.T) {
		t.Parallel()
		const name, other = "rt19-won-permit", "rt19-won-permit-other"
		sys, gate := gatedSystem(t, "*actors.SemCancel")
		logOpt, logs := logged()
		p, direct, rt := proxied(t, actorlock.WithCallTimeout(ct), actorkit.WithActorSystem(sys), logOpt)
		ctx := ctxFor(t, 30*time.Second)
		sem := rt.Semaphore(name)
		require.NoError(t, sem.Release(ctx, 1)) // the scripts loaded, the server's clock learnt
		ok, err := sem.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "0", direct.Get(ctx, name).Val())

		actx, cancel := context.WithCancel(ctx)
		acquired := make(chan error, 1)
		go func() { acquired <- sem.Acquire(actx, 1) }()
		time.Sleep(300 * time.Millisecond) // the waiter was refused: it waits
		cancel()
		await(t, gate.seen, 2*time.Second, "the Acquire's cancel, on its way")
		// The permit comes; the waiter takes it before its cancel arrives.
		require.NoError(t, direct.Incr(ctx, name).Err())
		require.NoError(t, direct.Publish(ctx, "redisson_sc:{"+name+"}", 1).Err())
		require.Eventually(t, func() bool { return direct.Get(ctx, name).Val() == "0" }, 3*time.Second, 5*time.Millisecond,
			"the waiter took the permit")
		time.Sleep(100 * time.Millisecond) // its grant reaches the Go caller's reply channel

		calls := sent(p, name)
		landed := occupyFlights(t, ctx, p, rt, other, hold)
		gate.release() // the cancel arrives: the grant won, and is given back
		require.ErrorIs(t, await(t, acquired, 5*time.Second, "the cancelled Acquire"), context.Canceled)
		for range 4 {
			await(t, landed, 5*time.Second, "a held flight lands")
		}
		assert.Eventually(t, func() bool { return direct.Get(ctx, name).Val() == "1" }, 5*time.Second, 20*time.Millisecond,
			"the permit the cancelled Acquire won is back (pool: %s; give-back calls sent: %d; log: %s)",
			direct.Get(ctx, name).Val(), calls(), firstLines(logs.String(), 3))
	})
	t.Run("item", func(t *testing.T) {
		t.Parallel()
		const name, other = "rt19-won-item", "rt19-won-item-other"
		sys, gate := gatedSystem(t, "*actors.TakeCancel")
		logOpt, logs := logged()
		p, direct, rt := proxied(t, actorlock.WithCallTimeout(ct), actorkit.WithActorSystem(sys), logOpt)
		ctx := ctxFor(t, 30*time.Second)
		q := rt.BlockingQueue(name)
		require.NoError(t, q.Offer(ctx, []byte("warm"))) // the scripts loaded, the server's clock learnt
		v, err := q.Take(ctx)
		require.NoError(t, err)
		require.Equal(t, "warm", string(v))
		require.NoError(t, rt.Semaphore(other).Release(ctx, 1))

		tctx, cancel := context.WithCancel(ctx)
		took := make(chan error, 1)
		go func() { _, err := q.Take(tctx); took <- err }()
		time.Sleep(300 * time.Millisecond) // the Take waits on its blocking pop
		cancel()
		await(t, gate.seen, 2*time.Second, "the Take's cancel, on its way")
		// The item comes; the waiter takes it before its cancel arrives.
		require.NoError(t, direct.RPush(ctx, name, "item").Err())
		require.Eventually(t, func() bool { return direct.LLen(ctx, name).Val() == 0 }, 3*time.Second, 5*time.Millisecond,
			"the waiter took the item")
		time.Sleep(200 * time.Millisecond) // its pop's hold ended, the item handed to the Go caller

		calls := sent(p, name)
		landed := occupyFlights(t, ctx, p, rt, other, hold)
		gate.release() // the cancel arrives: the item won, and is given back
		require.ErrorIs(t, await(t, took, 5*time.Second, "the cancelled Take"), context.Canceled)
		for range 4 {
			await(t, landed, 5*time.Second, "a held flight lands")
		}
		assert.Eventually(t, func() bool { return direct.LLen(ctx, name).Val() == 1 }, 5*time.Second, 20*time.Millisecond,
			"the item the cancelled Take won is back at the head of the queue (%v; give-back calls sent: %d; log: %s)",
			direct.LRange(ctx, name, 0, -1).Val(), calls(), firstLines(logs.String(), 3))
	})
}

// RT19-2 (liveness: a call held past its ctx and the call timeout). With a
// client that has ContextTimeoutEnabled, the runtime leaves it to go-redis
// to end a call with its ctx (Config.ClientEndsCalls: no call bound). A
// call that queues in the batching client waits for a flight to land
// whatever its ctx (Batched.Process: <-c.wake), and the pipeline its batch
// then leaves in runs under context.WithoutCancel: no deadline but the
// client's read timeout (5 s by default; none with ReadTimeout -1). So a
// Semaphore.Release with a 300 ms ctx, queued behind four busy flights
// beside another call whose command Redis is slow to take, returns when
// that other call's pipeline lands, seconds after its ctx ended and its
// own call was dropped unsent (376376c), well past the call timeout of
// 1 s. (options.go, WithCallTimeout: "It holds with any client";
// TestCallTimeoutHoldsWithAnyClient covers only a lone call.)
func TestRedTeam19QueuedCallOutlivesItsCtxWithAContextHonouringClient(t *testing.T) {
	t.Parallel()
	const ct = time.Second
	const a, b, c = "rt19-cte-a", "rt19-cte-b", "rt19-cte-c"
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	rt := newRuntime(t, rdb, actorlock.WithCallTimeout(ct))
	ctx := ctxFor(t, 30*time.Second)
	for _, name := range []string{a, b, c} {
		require.NoError(t, rt.Semaphore(name).Release(ctx, 1)) // the script loaded, the server's clock learnt
	}

	// Every flight on the wire: each ends at its own call's deadline (1 s).
	held := p.on(4, holdCommand, 3*time.Second, func(cmd respCommand) bool { return cmd.scriptOn(a) })
	for range 4 {
		go func() { _ = rt.Semaphore(a).Release(ctx, 1) }()
	}
	for range 4 {
		await(t, held.hits, 5*time.Second, "a flight held")
	}
	slow := p.on(1, holdCommand, 4*time.Second, func(cmd respCommand) bool { return cmd.scriptOn(c) })
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	released := make(chan error, 1)
	go func() { released <- rt.Semaphore(b).Release(short, 1) }()
	time.Sleep(50 * time.Millisecond)
	go func() { _ = rt.Semaphore(c).Release(ctx, 1) }() // queues beside it
	err := await(t, released, 10*time.Second, "the Release with a 300 ms ctx")
	took := time.Since(start)
	t.Logf("Release with a 300 ms ctx returned after %v: %v", took, err)
	await(t, slow.hits, time.Second, "the call queued beside it, sent")
	require.Error(t, err)
	assert.Less(t, took, ct+500*time.Millisecond, "a call returns within the call timeout, with any client")
}

// RT19-3 (liveness: Poll held past its ctx and the call timeout, with
// go-redis's default client). BlockingQueue.Poll runs its pop under the
// caller's own ctx (actors.Handle.Pop: no directCtx, no call bound), and
// the pop is a raw LMOVE through the batching client (scripts.Pop: no
// scripts.bounded either), so nothing but go-redis's read timeout (5 s)
// ends it: with Redis slow to take the command, a Poll with a 300 ms ctx
// returns seconds later, and with an item its caller had given up on.
// (options.go, WithCallTimeout: "It holds with any client".)
func TestRedTeam19PollIsBoundedByNeitherItsCtxNorTheCallTimeout(t *testing.T) {
	t.Parallel()
	const ct = time.Second
	const name = "rt19-poll-unbounded"
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(ct))
	ctx := ctxFor(t, 30*time.Second)
	q := rt.BlockingQueue(name)
	require.NoError(t, q.Offer(ctx, []byte("warm")))
	_, ok, err := q.Poll(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, direct.RPush(ctx, name, "item").Err())

	slow := p.on(1, holdCommand, 4*time.Second, func(c respCommand) bool { return c.name() == "LMOVE" && len(c) > 1 && c[1] == name })
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	v, ok, err := q.Poll(short)
	took := time.Since(start)
	t.Logf("Poll with a 300 ms ctx returned after %v: %q %v %v", took, v, ok, err)
	await(t, slow.hits, time.Second, "the pop, held back")
	assert.Less(t, took, ct+500*time.Millisecond, "a call returns within the call timeout, with any client")
}
