package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/observe"
)

// Names touched one after another, some of them contended (the waiter
// subscribes to the unlock channel), leave no per-name state once idle: no
// lock actor, renewal or subscription in the runtime, no channel in Redis.
// ./dev.sh scale checks the same for a million names.
func TestNamesTouchedOneAfterAnotherLeaveNoState(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t, actorlock.WithIdleTimeout(300*time.Millisecond))
	other := newRuntime(t, rdb) // holds the contended names
	ctx := ctxFor(t, 2*time.Minute)
	const names = 2000
	sawState := false
	for i := range names {
		name := fmt.Sprintf("touch:%d", i)
		if i%100 == 0 {
			// Contended: held by another runtime, waited for here,
			// subscribed, until the unlock.
			h, err := other.Lock(name).Acquire(ctx)
			require.NoError(t, err)
			got := make(chan error, 1)
			go func() {
				h2, err := rt.Lock(name).Acquire(ctx)
				if err == nil {
					err = h2.Unlock(ctx)
				}
				got <- err
			}()
			require.Eventually(t, func() bool {
				st, err := rt.Stats(ctx)
				return err == nil && st.Subscriptions > 0
			}, 10*time.Second, 5*time.Millisecond, "the waiter on %s subscribes", name)
			st, err := rt.Stats(ctx)
			require.NoError(t, err)
			sawState = sawState || st.LockActors > 0
			require.NoError(t, h.Unlock(ctx))
			require.NoError(t, <-got)
			continue
		}
		h, err := rt.Lock(name).Acquire(ctx)
		require.NoError(t, err)
		if i == 1 {
			st, err := rt.Stats(ctx)
			require.NoError(t, err)
			assert.Positive(t, st.LockActors, "a held name has a lock actor")
			assert.Equal(t, 1, st.Renewals, "the watchdog renews the one hold")
		}
		require.NoError(t, h.Unlock(ctx))
	}
	assert.True(t, sawState, "a waited-for name has a lock actor (else the check below proves nothing)")
	require.Eventually(t, func() bool {
		st, err := rt.Stats(ctx)
		return err == nil && st == observe.Stats{}
	}, 20*time.Second, 20*time.Millisecond, "per-name state must go once idle")
	channels, err := rdb.PubSubChannels(ctx, "*").Result()
	require.NoError(t, err)
	assert.Empty(t, channels, "PUBSUB CHANNELS shows nothing of ours")
	keys, err := rdb.Keys(ctx, "touch:*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "no lock key left")
}
