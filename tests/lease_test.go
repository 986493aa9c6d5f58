package tests

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// pexpireCalls counts PEXPIRE calls (including those made by scripts) on the
// server, so a test can tell whether anything renewed a key.
func pexpireCalls(t *testing.T, ctx context.Context, rdb *redis.Client) int64 {
	t.Helper()
	stats, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	return commandCalls(stats, "pexpire")
}

func TestFixedLeaseIsOvertakenWithoutRenewal(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		_, rt := d.setup(t, actorlock.WithWatchdog(600*time.Millisecond))
		ctx := ctxFor(t, 10*time.Second)

		holder, err := rt.Lock("leased").Acquire(ctx, actorlock.LeaseTime(2*time.Second))
		require.NoError(t, err)
		acquired := time.Now()
		node := d.nodeOf(t, "leased")
		before := pexpireCalls(t, ctx, node)

		h, err := rt.Lock("leased").Acquire(ctx, actorlock.WaitTime(5*time.Second))
		require.NoError(t, err)
		took := time.Since(acquired)
		assert.Less(t, took, 2*time.Second+50*time.Millisecond, "overtaken within lease + 50ms")
		assert.Greater(t, took, 1900*time.Millisecond, "not before the lease ran out")
		// The only PEXPIRE since is the new holder's acquisition (and its
		// fencing counter); a renewal of the fixed lease would add more.
		assert.LessOrEqual(t, pexpireCalls(t, ctx, node)-before, int64(2), "a fixed lease is never renewed")

		select {
		case <-holder.Done():
			assert.ErrorIs(t, holder.Err(), actorlock.ErrLost)
		default:
			t.Fatal("the expired holder's Done must be closed")
		}
		require.NoError(t, h.Unlock(ctx))
	})
}

func TestWatchdogKeepsTheLockAndStopsAtUnlock(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		const lease = time.Second
		rdb, rt := d.setup(t, actorlock.WithWatchdog(lease))
		ctx := ctxFor(t, 20*time.Second)

		h, err := rt.Lock("watched").Acquire(ctx)
		require.NoError(t, err)
		minTTL := lease
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			ttl, err := rdb.PTTL(ctx, "watched").Result()
			require.NoError(t, err)
			require.Positive(t, ttl, "the lock must stay held")
			minTTL = min(minTTL, ttl)
		}
		assert.GreaterOrEqual(t, minTTL, lease/3-100*time.Millisecond, "renewed every lease/3")
		select {
		case <-h.Done():
			t.Fatalf("lost while renewed: %v", h.Err())
		default:
		}
		require.NoError(t, h.Unlock(ctx))

		// A foreign key under the same name must not be extended by us.
		require.NoError(t, rdb.HSet(ctx, "watched", "someone-else:1", 1).Err())
		require.NoError(t, rdb.PExpire(ctx, "watched", 1500*time.Millisecond).Err())
		time.Sleep(2 * lease)
		ttl, err := rdb.PTTL(ctx, "watched").Result()
		require.NoError(t, err)
		assert.Equal(t, time.Duration(-2), ttl, "the foreign key expired: nothing renewed it")
		st, err := rt.Stats(ctx)
		require.NoError(t, err)
		assert.Zero(t, st.Renewals)
	})
}

func TestLostLockEndsHeld(t *testing.T) {
	t.Parallel()
	const lease = 900 * time.Millisecond
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, ctx context.Context, rdb redis.UniversalClient, d *deployment)
	}{
		{"deleted", func(t *testing.T, ctx context.Context, rdb redis.UniversalClient, _ *deployment) {
			require.NoError(t, rdb.Del(ctx, "lost").Err())
		}},
		{"taken", func(t *testing.T, ctx context.Context, rdb redis.UniversalClient, _ *deployment) {
			require.NoError(t, rdb.Del(ctx, "lost").Err())
			require.NoError(t, rdb.HSet(ctx, "lost", "intruder:1", 1).Err())
		}},
		{"redis restarted without persistence", func(t *testing.T, _ context.Context, _ redis.UniversalClient, d *deployment) {
			require.NoError(t, d.restart(t, "lost"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachDeployment(t, func(t *testing.T, d *deployment) {
				rdb, rt := d.setup(t, actorlock.WithWatchdog(lease))
				ctx := ctxFor(t, 40*time.Second)
				h, err := rt.Lock("lost").Acquire(ctx)
				require.NoError(t, err)
				lostAt := time.Now()
				tc.lose(t, ctx, rdb, d)
				select {
				case <-h.Done():
				case <-time.After(lease/3 + time.Second):
					t.Fatal("Done did not close within lease/3 + 1s")
				}
				t.Logf("lost noticed after %v", time.Since(lostAt))
				require.ErrorIs(t, h.Err(), actorlock.ErrLost)
				require.ErrorIs(t, context.Cause(h.Context()), actorlock.ErrLost)
				err = h.Unlock(ctx)
				require.ErrorIs(t, err, actorlock.ErrLost, "Unlock of a lost lock fails")
			})
		})
	}
}

func TestHeldIsLostWhenRenewalFailsForALease(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		const lease = time.Second
		rdb, rt := d.setup(t, actorlock.WithWatchdog(lease), actorlock.WithCallTimeout(300*time.Millisecond))
		ctx := ctxFor(t, 15*time.Second)
		h, err := rt.Lock("frozen").Acquire(ctx)
		require.NoError(t, err)
		acquired := time.Now()
		// Redis freezes: renewals cannot reach it. Done must fire before the
		// lease the last successful renewal bought runs out.
		srv := d.serverOf(t, "frozen")
		require.NoError(t, srv.Pause())
		defer srv.Resume()
		select {
		case <-h.Done():
		case <-time.After(2 * lease):
			t.Fatal("Done did not close while Redis was unreachable")
		}
		// Done closes at the acquisition's send time + lease - drift
		// allowance (25 ms here): never after the lease, nor much before.
		lostAfter := time.Since(acquired)
		t.Logf("Done closed %v after the acquisition", lostAfter)
		assert.Less(t, lostAfter, lease+100*time.Millisecond, "Done closes by the end of the lease (+ scheduling)")
		assert.Greater(t, lostAfter, lease-100*time.Millisecond, "Done does not close long before the lease ends")
		assert.ErrorIs(t, h.Err(), actorlock.ErrLost)
		require.NoError(t, srv.Resume())
		require.Eventually(t, func() bool { return rdb.Ping(ctx).Err() == nil }, 5*time.Second, 10*time.Millisecond)
	})
}

func TestHolderProcessKilledIsOvertakenAfterLease(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		const lease = 2 * time.Second
		_, rt := d.setup(t, actorlock.WithWatchdog(lease))
		ctx := ctxFor(t, 20*time.Second)
		w := spawn(t, "hold", with(d.workerEnv(), map[string]string{"LOCK_NAME": "crash", "WATCHDOG_MS": "2000"}))
		w.expect(t, "ACQUIRED", 10*time.Second)

		var wg sync.WaitGroup
		var took time.Duration
		var err error
		var h *actorlock.Held
		wg.Add(1)
		killedAt := make(chan time.Time, 1)
		go func() {
			defer wg.Done()
			h, err = rt.Lock("crash").Acquire(ctx)
			took = time.Since(<-killedAt)
		}()
		time.Sleep(1500 * time.Millisecond) // the child renewed at least once
		require.NoError(t, w.cmd.Process.Kill())
		killedAt <- time.Now()
		wg.Wait()
		require.NoError(t, err)
		assert.Less(t, took, lease+time.Second, "a dead holder is overtaken within the watchdog lease + 1s")
		// Its key lives until the lease its last renewal (at most lease/3
		// before the kill) bought has run out: no earlier grant.
		assert.Greater(t, took, 2*lease/3-100*time.Millisecond, "not overtaken before its key expired")
		t.Logf("overtaken %v after the holder was killed", took)
		require.NoError(t, h.Unlock(ctx))
	})
}
