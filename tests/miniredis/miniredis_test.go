// Package miniredis shows whether actorlock works on miniredis, the
// in-process Redis fake that many Go services test with. It is a module of
// its own so that actorlock's users do not inherit miniredis.
//
// The answer: no. The happy paths of locks pass, but miniredis lets keys
// expire only when the test moves its clock (FastForward), so a lease that
// ran out in real time still blocks every other owner; and it has no Lua
// `struct` library, so the delayed queue's mover fails and loses the items
// it had already taken out of the queue. Test against a real redis-server
// (package actorlocktest).
package miniredis

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

func setup(t *testing.T) (*miniredis.Miniredis, *actorlock.Runtime, *logBuffer) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	logs := &logBuffer{}
	rt, err := actorlock.New(rdb, actorlock.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	})
	return mr, rt, logs
}

// What works: taking a lock, contention, and a waiter woken by the unlock
// message.
func TestMiniredisRunsTheLocksHappyPath(t *testing.T) {
	_, rt, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h, err := rt.Lock("a").Acquire(ctx)
	require.NoError(t, err)
	_, err = rt.Lock("a").TryAcquire(ctx)
	require.ErrorIs(t, err, actorlock.ErrNotAcquired)
	got := make(chan error, 1)
	go func() {
		h2, err := rt.Lock("a").Acquire(ctx, actorlock.WaitTime(10*time.Second))
		if err == nil {
			err = h2.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	require.NoError(t, h.Unlock(ctx))
	require.NoError(t, <-got)
	assert.Less(t, time.Since(start), 2*time.Second, "woken by pub/sub")
}

// What does not: a lease that ran out. miniredis keeps the key until the
// test moves its clock, so the lock of a holder that died is never taken
// over. (A holder of ours gives its lease back when it runs out, which hides
// this, so the dead holder here is written by hand.)
func TestMiniredisDoesNotExpireLeases(t *testing.T) {
	mr, rt, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A holder that died (here written as Redisson writes a hold, with a
	// 500 ms lease): on a real Redis its lease ends and the lock is free.
	mr.HSet("a", "dead-client:1", "1")
	mr.SetTTL("a", 500*time.Millisecond)
	time.Sleep(time.Second)
	assert.True(t, mr.Exists("a"), "miniredis expired the key in real time")
	_, err := rt.Lock("a").TryAcquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrNotAcquired, "another owner took over an expired lease")

	mr.FastForward(time.Second)
	h, err := rt.Lock("a").TryAcquire(ctx)
	require.NoError(t, err, "free once the test moves miniredis's clock")
	require.NoError(t, h.Unlock(ctx))
}

// What does not: the delayed queue. Its mover's script needs Lua's struct
// library (Redisson's member encoding), which miniredis lacks: it fails
// after taking the due item out of the delayed queue (Redis does not roll a
// failed script back, nor does miniredis), so the item is lost.
func TestMiniredisLosesDelayedItems(t *testing.T) {
	mr, rt, logs := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	q := rt.DelayedQueue("jobs")
	t.Cleanup(func() { _ = q.Close() })
	require.NoError(t, q.Offer(ctx, []byte("job"), 100*time.Millisecond))
	take, cancelTake := context.WithTimeout(ctx, 2*time.Second)
	defer cancelTake()
	_, err := rt.BlockingQueue("jobs").Take(take)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the item arrived")
	assert.Contains(t, logs.String(), "nonexistent global variable 'struct'")
	assert.False(t, mr.Exists("jobs"), "the item reached the list")
	for _, k := range []string{"redisson_delay_queue_timeout:{jobs}", "redisson_delay_queue:{jobs}"} {
		assert.False(t, mr.Exists(k), "%s still holds the item", k)
	}
}

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
