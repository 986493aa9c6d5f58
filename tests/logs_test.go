package tests

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// Issue 32 item 4: a library's start-up is no news. With WithLogger at
// INFO, New, a lock and Close log nothing; at DEBUG, the actor system's
// start is there.
func TestStartUpLogsAtDebug(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 30*time.Second)
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		buf := &lockedBuffer{}
		rt, err := actorlock.New(rdb, actorlock.WithLogger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: level}))))
		require.NoError(t, err)
		h, err := rt.Lock("startup").Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, h.Unlock(ctx))
		require.NoError(t, rt.Close(ctx))
		if level == slog.LevelInfo {
			assert.Empty(t, buf.String(), "logged at INFO or above by a clean New, lock and Close")
		} else {
			assert.Contains(t, buf.String(), "level=DEBUG msg=\"actor system started\"")
		}
	}
}

// Issue 32 item 4: a clean Close logs no dead letter. Close stops actors
// whose Redis calls are still out (a delayed queue's mover moving, a Take's
// BLPOP, a semaphore's and a latch's reads); their results, which nobody
// waits for any more, were sent to the stopped actors and logged as dead
// letters ("[DeadLetter] ... message=&{moved:...}", 2 runs in 5). Many
// Close cycles with every primitive busy log none.
func TestCleanCloseLogsNoDeadLetter(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 3*time.Minute)
	buf := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const cycles = 40
	for i := range cycles {
		rt, err := actorlock.New(rdb, actorlock.WithLogger(logger))
		require.NoError(t, err)
		name := fmt.Sprintf("close-cycle:%d", i)
		q := rt.DelayedQueue(name + ":q")
		for d := range 20 {
			require.NoError(t, q.Offer(ctx, []byte("x"), time.Duration(d)*time.Millisecond))
		}
		h, err := rt.Lock(name).Acquire(ctx)
		require.NoError(t, err)
		_, err = rt.CountDownLatch(name+":latch").TrySetCount(ctx, 1)
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = rt.BlockingQueue(name + ":empty").Take(ctx) })
		wg.Go(func() { _ = rt.Semaphore(name+":sem").Acquire(ctx, 1) })
		wg.Go(func() { _ = rt.CountDownLatch(name + ":latch").Await(ctx) })
		wg.Go(func() { _, _ = rt.Lock(name).Acquire(ctx) })
		// Let the calls go out, at a different moment each cycle.
		time.Sleep(time.Duration(i%8) * 3 * time.Millisecond)
		require.NoError(t, rt.Close(ctx))
		wg.Wait()
		assert.ErrorIs(t, h.Err(), actorlock.ErrClosed)
	}
	assert.NotContains(t, buf.String(), "DeadLetter", "a clean Close logs no dead letter")
	for _, line := range strings.Split(buf.String(), "\n") {
		assert.False(t, strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR"), "a clean Close warns of nothing: %s", line)
	}
}
