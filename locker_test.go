package actorlock_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// Issue 25 item 5: a Locker never panics when its runtime closes: goroutines
// waiting in Lock when Close comes, and Lock called afterwards, block for
// good (never returning without the lock), Err reports ErrClosed, Unlock
// after Close returns, and rt.Locker refuses. It lives here, not in tests/,
// whose goroutine leak check would flag the goroutines it leaves blocked.
func TestLockerBlocksAfterClose(t *testing.T) {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		t.Skip("no Redis: set REDIS_ADDR or install redis-server")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	rt, err := actorlock.New(rdb)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("locker-close-%d", time.Now().UnixNano())

	// Held by another runtime, so that this one's waiters subscribe to
	// the lock's channel (Stats shows it).
	other, err := actorlock.New(rdb)
	require.NoError(t, err)
	defer func() { _ = other.Close(context.Background()) }()
	held, err := other.Lock(name).Acquire(ctx)
	require.NoError(t, err)
	// A Locker of this runtime holding another name when Close comes.
	holder, err := rt.Locker(name + ":other")
	require.NoError(t, err)
	holder.Lock()

	// Goroutines already waiting in Lock when Close comes.
	type outcome struct {
		panicked any
		returned bool
	}
	const waiters = 3
	lockers := make([]*actorlock.Locker, waiters)
	outcomes := make(chan outcome, waiters+1)
	lock := func(k *actorlock.Locker) {
		defer func() {
			if r := recover(); r != nil {
				outcomes <- outcome{panicked: r}
			}
		}()
		k.Lock()
		outcomes <- outcome{returned: true}
	}
	for i := range lockers {
		lockers[i], err = rt.Locker(name)
		require.NoError(t, err)
		go lock(lockers[i])
	}
	// They are waiting: subscribed to the lock's channel, which a Lock
	// does after its attempt found the lock held by the other runtime.
	// (One that has not got that far when Close comes calls Lock after
	// Close, which is checked too.)
	require.Eventually(t, func() bool {
		st, err := rt.Stats(ctx)
		return err == nil && st.Subscriptions > 0
	}, 10*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // the others' attempts

	require.NoError(t, rt.Close(ctx))
	holder.Unlock() // returns, and reports
	assert.Error(t, holder.Err(), "the hold ended with Close")
	// Lock called after Close.
	go lock(holder)

	select {
	case o := <-outcomes:
		t.Fatalf("Lock after Close did not block: %+v", o)
	case <-time.After(2 * time.Second):
	}
	for _, k := range append(lockers, holder) {
		assert.ErrorIs(t, k.Err(), actorlock.ErrClosed)
	}
	// The other runtime's hold is untouched; once it is released, no
	// blocked Lock takes the lock.
	assert.NoError(t, held.Err())
	require.NoError(t, held.Unlock(ctx))
	time.Sleep(500 * time.Millisecond)
	for _, n := range []string{name, name + ":other"} {
		exists, err := rdb.Exists(ctx, n).Result()
		require.NoError(t, err)
		assert.Zero(t, exists, "%s: nobody holds it", n)
	}
	select {
	case o := <-outcomes:
		t.Fatalf("Lock after Close returned: %+v", o)
	default:
	}

	_, err = rt.Locker(name)
	assert.ErrorIs(t, err, actorlock.ErrClosed)
}
