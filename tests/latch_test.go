package tests

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// Five awaiters in two processes all return within 100 ms of the fifth
// CountDown.
func TestLatchReleasesAwaitersInTwoProcesses(t *testing.T) {
	t.Parallel()
	srv, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	l := rt.CountDownLatch("latch")
	ok, err := l.TrySetCount(ctx, 5)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = l.TrySetCount(ctx, 3)
	require.NoError(t, err)
	assert.False(t, ok)

	w := spawn(t, "latch-await", map[string]string{"REDIS_ADDR": srv.Addr, "LATCH": "latch", "AWAITERS": "2"})
	w.expect(t, "READY", 10*time.Second)
	var mu sync.Mutex
	var local []time.Time
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if assert.NoError(t, rt.CountDownLatch("latch").Await(ctx)) {
				mu.Lock()
				local = append(local, time.Now())
				mu.Unlock()
			}
		})
	}
	waitSubscribers(t, ctx, rdb, "redisson_countdownlatch__channel__{latch}", 2)
	for i := range 4 {
		require.NoError(t, l.CountDown(ctx))
		n, err := l.Count(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 4-i, n)
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	assert.Empty(t, local, "nobody returns before zero")
	mu.Unlock()
	fifth := time.Now()
	require.NoError(t, l.CountDown(ctx))
	wg.Wait()
	var all []time.Time
	all = append(all, local...)
	for range 2 {
		ns, err := strconv.ParseInt(w.expect(t, "DONE ", 5*time.Second), 10, 64)
		require.NoError(t, err)
		all = append(all, time.Unix(0, ns))
	}
	for _, at := range all {
		assert.Less(t, at.Sub(fifth), 100*time.Millisecond)
		t.Logf("awaiter returned %v after the fifth CountDown was called", at.Sub(fifth))
	}
	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, l.Await(ctx), "a latch at zero returns at once")
}

func TestLatchAwaitDeadlineAndLostMessages(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	l := rt.CountDownLatch("latch-dl")
	_, err := l.TrySetCount(ctx, 2)
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = l.Await(dctx)
	took := time.Since(start)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, took, 500*time.Millisecond)
	assert.Less(t, took, 600*time.Millisecond)

	// Reaching zero unannounced (the key deleted, no message) still
	// releases an awaiter, and so does Delete.
	done := make(chan time.Time, 1)
	go func() {
		if assert.NoError(t, rt.CountDownLatch("latch-dl").Await(ctx)) {
			done <- time.Now()
		}
	}()
	waitSubscribers(t, ctx, rdb, "redisson_countdownlatch__channel__{latch-dl}", 1)
	zeroed := time.Now()
	require.NoError(t, rdb.Del(ctx, "latch-dl").Err())
	select {
	case at := <-done:
		assert.Less(t, at.Sub(zeroed), 1200*time.Millisecond)
	case <-time.After(5 * time.Second):
		t.Fatal("awaiter hung after an unannounced zero")
	}
	_, err = l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	go func() {
		if assert.NoError(t, rt.CountDownLatch("latch-dl").Await(ctx)) {
			done <- time.Now()
		}
	}()
	waitSubscribers(t, ctx, rdb, "redisson_countdownlatch__channel__{latch-dl}", 1)
	deleted := time.Now()
	existed, err := l.Delete(ctx)
	require.NoError(t, err)
	assert.True(t, existed)
	select {
	case at := <-done:
		assert.Less(t, at.Sub(deleted), 100*time.Millisecond)
	case <-time.After(5 * time.Second):
		t.Fatal("Delete did not release the awaiter")
	}
	assert.ErrorIs(t, rt.CountDownLatch("").Await(ctx), actorlock.ErrInvalidArgument)
	_, err = l.TrySetCount(ctx, 0)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
}
