package chaos

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// Failover to a lagging replica, without WithReplicaSync: docs/guarantees.md says
// the lock can be lost. Expected outcome: the promoted replica lacks A's
// lock, B acquires it (A may not know yet: recorded), B's
// token beats A's so the fenced resource rejects A's stale write, and A's
// Done closes at its next renewal.
func TestSentinelFailoverToLaggingReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	master, err := redisserver.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = master.Close() })
	replica, err := redisserver.StartReplica(master)
	require.NoError(t, err)
	t.Cleanup(func() { _ = replica.Close() })
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	require.Eventually(t, func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 10*time.Second, 20*time.Millisecond)
	sentinel, err := redisserver.StartSentinel(master, "locks", time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sentinel.Close() })
	res := startResource(t)

	const lease = 6 * time.Second // outlasts the failover: A does not lose by expiry
	runtime := func() *actorlock.Runtime {
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "locks", SentinelAddrs: []string{sentinel.Addr}})
		rt, err := actorlock.New(c, actorlock.WithWatchdog(lease))
		require.NoError(t, err)
		t.Cleanup(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer ccancel()
			_ = rt.Close(cctx)
			_ = c.Close()
		})
		return rt
	}
	rtA, rtB := runtime(), runtime()
	// The replica lags: frozen, its link cut (a frozen replica's kernel
	// would still take in the stream), A acquires, and the master dies
	// before the replica could catch up.
	require.NoError(t, replica.Pause())
	mc := redis.NewClient(&redis.Options{Addr: master.Addr})
	t.Cleanup(func() { _ = mc.Close() })
	require.NoError(t, mc.ClientKillByFilter(ctx, "TYPE", "replica").Err())
	a, err := rtA.Lock("failover").Acquire(ctx, actorlock.WaitTime(3*time.Second))
	require.NoError(t, err)
	require.NoError(t, master.Kill())
	require.NoError(t, replica.Resume())
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr})
	t.Cleanup(func() { _ = sc.Close() })
	require.Eventually(t, func() bool {
		addr, err := sc.GetMasterAddrByName(ctx, "locks").Result()
		return err == nil && addr[1] == strconv.Itoa(replica.Port)
	}, 30*time.Second, 100*time.Millisecond, "Sentinel promotes the replica")

	b, err := rtB.Lock("failover").Acquire(ctx, actorlock.WaitTime(5*time.Second))
	require.NoError(t, err, "expected (documented): the promoted replica lacks A's lock and B gets it")
	bGot := time.Now()
	// Whether A already knows depends on whether one of its renewals (every
	// lease/3) reached the new master before B's grant: either way its hold
	// is gone and its writes must be refused.
	knew := a.Err() != nil
	t.Logf("at B's grant, A's hold: %v", a.Err())
	assert.Greater(t, b.Token(), a.Token(), "tokens never go back, even across a failover that lost the counter")

	ok, err := fencedWrite.Run(ctx, res, []string{"res"}, b.Token(), 1).Int()
	require.NoError(t, err)
	assert.Equal(t, 1, ok, "B's write accepted")
	ok, err = fencedWrite.Run(ctx, res, []string{"res"}, a.Token(), 2).Int()
	require.NoError(t, err)
	assert.Equal(t, 0, ok, "A's stale write rejected")

	select {
	case <-a.Done():
		if !knew {
			t.Logf("A's Done closed %v after B's grant", time.Since(bGot))
		}
		assert.ErrorIs(t, a.Err(), actorlock.ErrLost)
	case <-time.After(lease/3 + 2*time.Second):
		t.Fatal("A's Done did not close after its renewal met B's lock")
	}
	require.NoError(t, b.Unlock(ctx))
}
