package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/observe"
)

// dormantIdle is the idle timeout of these tests: a name whose only state
// is a hold goes dormant (no live lock actor) this long after its last
// request.
const dormantIdle = 300 * time.Millisecond

// waitDormant waits until n held names have no live lock actor.
func waitDormant(t *testing.T, ctx context.Context, rt *actorlock.Runtime, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, err := rt.Stats(ctx)
		return err == nil && st.DormantLocks == n && st.LockActors == n
	}, 10*time.Second, 20*time.Millisecond, "the held names go dormant")
}

// A held name keeps no live actor, and everything still works on it: the
// watchdog keeps it held past its lease, a re-entry through the Held's
// context re-enters, another owner is refused, each Unlock releases one
// acquisition, and then nothing is left.
func TestDormantHoldServesEverything(t *testing.T) {
	const lease = 3 * time.Second
	_, rdb, rt := setup(t, actorlock.WithWatchdog(lease), actorlock.WithIdleTimeout(dormantIdle))
	ctx := ctxFor(t, time.Minute)
	l := rt.Lock("dormant:a")
	h, err := l.Acquire(ctx)
	require.NoError(t, err)
	waitDormant(t, ctx, rt, 1)
	st, err := rt.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Renewals, "still registered with the watchdog")

	// Past a lease and a half: only the watchdog's renewals, taken by the
	// manager for the dormant record, keep the hold and its validity.
	time.Sleep(lease * 3 / 2)
	require.NoError(t, h.Err(), "the hold outlived its lease while dormant")
	assert.Equal(t, "1", rdb.HGet(ctx, "dormant:a", h.Owner()).Val())
	assert.Greater(t, rdb.PTTL(ctx, "dormant:a").Val(), lease/2, "renewed while dormant")
	waitDormant(t, ctx, rt, 1)

	// Another owner is refused; the re-entry wakes the name and re-enters.
	_, err = l.TryAcquire(ctx)
	require.ErrorIs(t, err, actorlock.ErrNotAcquired)
	waitDormant(t, ctx, rt, 1)
	h2, err := l.TryAcquire(h.Context())
	require.NoError(t, err)
	assert.Equal(t, h.Owner(), h2.Owner())
	assert.Greater(t, h2.Token(), h.Token())
	assert.Equal(t, "2", rdb.HGet(ctx, "dormant:a", h.Owner()).Val())
	waitDormant(t, ctx, rt, 1)

	require.NoError(t, h2.Unlock(ctx))
	assert.Equal(t, "1", rdb.HGet(ctx, "dormant:a", h.Owner()).Val())
	require.NoError(t, h.Err(), "the first acquisition still holds")
	waitDormant(t, ctx, rt, 1)
	require.NoError(t, h.Unlock(ctx))
	assert.Zero(t, rdb.Exists(ctx, "dormant:a").Val(), "released in Redis")
	require.Eventually(t, func() bool {
		st, err := rt.Stats(ctx)
		return err == nil && st == observe.Stats{}
	}, 10*time.Second, 20*time.Millisecond, "nothing left for the name")
}

// A dormant hold is lost as a live one is: deleted in Redis, the watchdog
// finds it gone and Done closes with ErrLost; a fixed lease's local deadline
// passes (no actor, one timer for all dormant names) and Done closes on time,
// before Redis can let another owner in.
func TestDormantHoldIsLostOnTime(t *testing.T) {
	const lease = 3 * time.Second
	_, rdb, rt := setup(t, actorlock.WithWatchdog(lease), actorlock.WithIdleTimeout(dormantIdle))
	ctx := ctxFor(t, time.Minute)

	deleted, err := rt.Lock("dormant:deleted").Acquire(ctx)
	require.NoError(t, err)
	start := time.Now()
	fixed, err := rt.Lock("dormant:fixed").Acquire(ctx, actorlock.LeaseTime(lease))
	require.NoError(t, err)
	waitDormant(t, ctx, rt, 2)

	require.NoError(t, rdb.Del(ctx, "dormant:deleted").Err())
	select {
	case <-deleted.Done():
		require.ErrorIs(t, deleted.Err(), actorlock.ErrLost)
	case <-time.After(lease):
		require.FailNow(t, "a deleted dormant hold was not found lost within a lease")
	}

	select {
	case <-fixed.Done():
		took := time.Since(start)
		require.ErrorIs(t, fixed.Err(), actorlock.ErrLost)
		// The local deadline is the lease minus a drift allowance (~1 %)
		// from when the acquire was sent.
		assert.LessOrEqual(t, took, lease, "Done before the lease ends in Redis")
		assert.Greater(t, took, lease-500*time.Millisecond, "not long before the local deadline")
	case <-time.After(2 * lease):
		require.FailNow(t, "a dormant fixed-lease hold's deadline did not fire")
	}
	require.Eventually(t, func() bool {
		st, err := rt.Stats(ctx)
		return err == nil && st == observe.Stats{}
	}, 10*time.Second, 20*time.Millisecond, "nothing left once both are lost")
}

// Extend and Close work on dormant holds: Extend wakes the name and moves
// the lease in Redis; Close releases every dormant hold in Redis and ends
// its Held.
func TestDormantHoldExtendAndClose(t *testing.T) {
	const lease = 3 * time.Second
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	rt, err := actorlock.New(rdb, actorlock.WithWatchdog(lease), actorlock.WithIdleTimeout(dormantIdle))
	require.NoError(t, err)
	ctx := ctxFor(t, time.Minute)
	names := []string{"dormant:c1", "dormant:c2", "dormant:c3"}
	var helds []*actorlock.Held
	for i, name := range names {
		var opts []actorlock.AcquireOption
		if i == 0 {
			opts = append(opts, actorlock.LeaseTime(lease))
		}
		h, err := rt.Lock(name).Acquire(ctx, opts...)
		require.NoError(t, err)
		helds = append(helds, h)
	}
	waitDormant(t, ctx, rt, len(names))

	require.NoError(t, helds[0].Extend(ctx, 20*time.Second))
	assert.Greater(t, rdb.PTTL(ctx, names[0]).Val(), 10*time.Second, "extended in Redis")
	waitDormant(t, ctx, rt, len(names))
	time.Sleep(lease) // past the first lease: the extension holds locally too
	require.NoError(t, helds[0].Err())

	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, rt.Close(closeCtx))
	for i, h := range helds {
		select {
		case <-h.Done():
		default:
			require.Failf(t, "Close left a dormant Held open", "%s", names[i])
		}
		assert.ErrorIs(t, h.Err(), actorlock.ErrClosed)
	}
	n, err := rdb.Exists(ctx, names...).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "Close released every dormant hold in Redis")
	assert.ErrorIs(t, helds[1].Unlock(ctx), actorlock.ErrClosed)
}
