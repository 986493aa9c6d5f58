package tests

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

func TestDoRunsUnderTheLockAndUnlocks(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	l := rt.Lock("do")

	var inside bool
	err := l.Do(ctx, func(held context.Context) error {
		inside = true
		_, err := rt.Lock("do").TryAcquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrNotAcquired, "held while fn runs")
		n, err := l.HoldCount(held)
		assert.NoError(t, err)
		assert.Equal(t, 1, n, "fn's context names the hold")
		return nil
	})
	require.NoError(t, err)
	assert.True(t, inside)
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "unlocked after fn")

	// fn's error comes back as is; the lock is released.
	boom := errors.New("boom")
	err = rt.Lock("do").Do(ctx, func(context.Context) error { return boom })
	assert.ErrorIs(t, err, boom)
	locked, err = l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)

	// A panic in fn still unlocks.
	func() {
		defer func() { assert.Equal(t, "fn panicked", recover()) }()
		_ = l.Do(ctx, func(context.Context) error { panic("fn panicked") })
	}()
	locked, err = l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "unlocked after a panic")

	// Lost while fn ran: fn's context ends with ErrLost, and Do reports it
	// even though fn returned nil.
	err = l.Do(ctx, func(ctx context.Context) error {
		_, err := rt.Lock("do").ForceUnlock(context.WithoutCancel(ctx))
		require.NoError(t, err)
		select {
		case <-ctx.Done():
			assert.ErrorIs(t, context.Cause(ctx), actorlock.ErrLost)
		case <-time.After(10 * time.Second):
			t.Error("fn's context outlived the lock")
		}
		return nil
	})
	assert.ErrorIs(t, err, actorlock.ErrLost)

	// Not acquired: fn does not run.
	h, err := rt.Lock("do").Acquire(ctx)
	require.NoError(t, err)
	ran := false
	err = l.Do(ctx, func(context.Context) error { ran = true; return nil }, actorlock.WaitTime(200*time.Millisecond))
	assert.ErrorIs(t, err, actorlock.ErrNotAcquired)
	assert.False(t, ran)
	require.NoError(t, h.Unlock(ctx))

	assert.ErrorIs(t, l.Do(ctx, nil), actorlock.ErrInvalidArgument)
}

// Goroutines sharing one Locker exclude each other: unprotected
// read-modify-writes under it lose no update and never overlap.
func TestLockerExcludesLikeAMutex(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	var mu sync.Locker
	mu, err := rt.Locker("locker")
	require.NoError(t, err)

	var counter, inside, overlaps atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for range 15 {
				mu.Lock()
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				v := counter.Load()
				time.Sleep(time.Millisecond)
				counter.Store(v + 1)
				inside.Add(-1)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(90), counter.Load(), "lost updates")
	assert.Zero(t, overlaps.Load())
	assert.NoError(t, mu.(*actorlock.Locker).Err())

	_, err = rt.Locker("")
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	k, err := rt.Locker("locker")
	require.NoError(t, err)
	k.Unlock()
	assert.ErrorIs(t, k.Err(), actorlock.ErrUnlocked, "Unlock without Lock")
	assert.Nil(t, k.Context())
	k.Lock()
	require.NotNil(t, k.Context())
	assert.NoError(t, k.Context().Err())
	k.Unlock()
	assert.NoError(t, k.Err())
}

// Lock waits through a Redis outage (Err says why meanwhile); a Locker is
// refused once the runtime is closed. (Lock after Close blocks for good,
// which this package's goroutine leak check cannot host: see
// TestLockerBlocksAfterClose in the root package.)
func TestLockerWaitsOutAnOutageAndRefusesAfterClose(t *testing.T) {
	t.Parallel()
	srv, rdb, _ := setup(t)
	rt, err := actorlock.New(rdb, actorlock.WithCallTimeout(time.Second))
	require.NoError(t, err)
	k, err := rt.Locker("outage")
	require.NoError(t, err)

	require.NoError(t, srv.Kill())
	locked := make(chan struct{})
	go func() { k.Lock(); close(locked) }()
	require.Eventually(t, func() bool { return k.Err() != nil }, 10*time.Second, 10*time.Millisecond,
		"Err reports the failing attempts")
	select {
	case <-locked:
		t.Fatal("locked without Redis")
	default:
	}
	require.NoError(t, srv.Restart())
	select {
	case <-locked:
	case <-time.After(15 * time.Second):
		t.Fatal("Lock did not recover after Redis came back")
	}
	n, err := rdb.Exists(ctxFor(t, 5*time.Second), "outage").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "held in Redis")
	k.Unlock()
	require.NoError(t, k.Err())

	ctx := ctxFor(t, 10*time.Second)
	require.NoError(t, rt.Close(ctx))
	_, err = rt.Locker("outage")
	assert.ErrorIs(t, err, actorlock.ErrClosed)
	assert.ErrorContains(t, err, `"outage"`)
}

// TryAcquire makes one attempt: a WaitTime is refused, not ignored.
func TestTryAcquireRefusesWaitTime(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	ctx := ctxFor(t, 10*time.Second)
	_, err := rt.Lock("try").TryAcquire(ctx, actorlock.WaitTime(time.Second))
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	locked, err := rt.Lock("try").IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
}

// Extend keeps a LeaseTime hold past its first lease, in Redis and locally,
// and the hold ends when the extended lease is over.
func TestHeldExtendMovesTheLease(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	for _, l := range []*actorlock.Lock{rt.Lock("extend"), rt.FairLock("extend-fair")} {
		h, err := l.Acquire(ctx, actorlock.LeaseTime(time.Second))
		require.NoError(t, err)
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, h.Extend(ctx, 3*time.Second))
		extended := time.Now()
		ttl, err := rdb.PTTL(ctx, l.Name()).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 2500*time.Millisecond, "%s: Redis has the new lease", l.Name())

		// Never shortens.
		require.NoError(t, h.Extend(ctx, 100*time.Millisecond))
		ttl, err = rdb.PTTL(ctx, l.Name()).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 2*time.Second, "%s: a shorter extension shortened the lease", l.Name())

		time.Sleep(time.Second) // past the first lease
		select {
		case <-h.Done():
			t.Fatalf("%s: lost at its first lease despite Extend: %v", l.Name(), h.Err())
		default:
		}
		_, err = rt.Lock(l.Name()).TryAcquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrNotAcquired, "%s: taken over within the extended lease", l.Name())

		select {
		case <-h.Done():
			assert.ErrorIs(t, h.Err(), actorlock.ErrLost)
			since := time.Since(extended)
			assert.Greater(t, since, 2800*time.Millisecond, "%s: lost before the extended lease was over", l.Name())
			assert.Less(t, since, 4500*time.Millisecond, "%s", l.Name())
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not lost when the extended lease ran out", l.Name())
		}
		assert.ErrorIs(t, h.Extend(ctx, time.Second), actorlock.ErrLost)
	}
}

func TestHeldExtendRefusesWhatItCannotExtend(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)

	watched, err := rt.Lock("watched").Acquire(ctx)
	require.NoError(t, err)
	assert.ErrorIs(t, watched.Extend(ctx, time.Minute), actorlock.ErrInvalidArgument, "the watchdog renews it")
	require.NoError(t, watched.Unlock(ctx))
	assert.ErrorIs(t, watched.Extend(ctx, time.Minute), actorlock.ErrUnlocked)

	read, err := rt.ReadWriteLock("rw").ReadLocker().Acquire(ctx, actorlock.LeaseTime(5*time.Second))
	require.NoError(t, err)
	assert.ErrorIs(t, read.Extend(ctx, time.Minute), actorlock.ErrInvalidArgument)
	require.NoError(t, read.Unlock(ctx))

	h, err := rt.Lock("gone").Acquire(ctx, actorlock.LeaseTime(10*time.Second))
	require.NoError(t, err)
	assert.ErrorIs(t, h.Extend(ctx, 0), actorlock.ErrInvalidArgument)
	// Deleted behind the runtime's back: Extend finds out, and the hold ends.
	require.NoError(t, rdb.Del(ctx, "gone").Err())
	assert.ErrorIs(t, h.Extend(ctx, time.Minute), actorlock.ErrLost)
	select {
	case <-h.Done():
		assert.ErrorIs(t, h.Err(), actorlock.ErrLost)
	case <-time.After(5 * time.Second):
		t.Fatal("the hold outlived the lock Extend found gone")
	}
	n, err := rdb.Exists(ctx, "gone").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "Extend re-created the lock")
}

// An Unlock Redis cannot confirm leaves the hold held and renewed, so
// Locker.Unlock (like Do) tries again until it goes through: the lock is
// free once Redis answers again, not held by nobody.
func TestLockerUnlockRetriesThroughAStall(t *testing.T) {
	t.Parallel()
	srv, rdb, _ := setup(t)
	rt := newRuntime(t, rdb, actorlock.WithCallTimeout(time.Second))
	k, err := rt.Locker("stall")
	require.NoError(t, err)
	k.Lock()

	require.NoError(t, srv.Pause())
	unlocked := make(chan struct{})
	go func() { k.Unlock(); close(unlocked) }()
	require.Eventually(t, func() bool { return k.Err() != nil }, 10*time.Second, 10*time.Millisecond,
		"Err reports the failed release")
	select {
	case <-unlocked:
		t.Fatalf("Unlock gave up while Redis was stalled: %v", k.Err())
	case <-time.After(time.Second):
	}
	require.NoError(t, srv.Resume())
	select {
	case <-unlocked:
	case <-time.After(15 * time.Second):
		t.Fatal("Unlock did not go through once Redis answered")
	}
	assert.NoError(t, k.Err())
	n, err := rdb.Exists(ctxFor(t, 5*time.Second), "stall").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the lock is free")
}
