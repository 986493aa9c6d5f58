package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/scripts"
)

// A first unlock attempt (Fresh) skips reading its latch but still writes
// it, so that a retry of the same request id after an unknown outcome gets
// the first outcome instead of releasing a second hold.
func TestUnlockLatchFreshAttemptAndRetry(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 10*time.Second)
	const name, owner = "latch:fresh", "rt:1"
	acq := scripts.AcquireArgs{Name: name, Owner: owner, Lease: 10 * time.Second, Seen: -1}
	for range 2 {
		g, err := scripts.AcquireLock(ctx, rdb, acq)
		require.NoError(t, err)
		require.True(t, g.Acquired)
	}
	unlock := scripts.UnlockArgs{Name: name, Owner: owner, RequestID: "req-1", Holds: 1, IfCount: -1, LatchTTL: 10 * time.Second, Fresh: true}

	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	u, err := scripts.UnlockLock(ctx, rdb, unlock)
	require.NoError(t, err)
	assert.Equal(t, scripts.StillHeld, u.State)
	stats, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Zero(t, commandCalls(stats, "get"), "a fresh unlock does not read its latch")
	assert.Equal(t, "0", rdb.Get(ctx, "redisson_unlock_latch:{"+name+"}:req-1").Val(), "but writes it")

	// The retry of req-1 (not fresh) finds the latch: the hold it released
	// is not released again.
	unlock.Fresh = false
	u, err = scripts.UnlockLock(ctx, rdb, unlock)
	require.NoError(t, err)
	assert.Equal(t, scripts.StillHeld, u.State)
	assert.Equal(t, "1", rdb.HGet(ctx, name, owner).Val(), "one hold left: the retry released nothing")

	// The last hold: released once; its retry answers Released again.
	unlock.RequestID, unlock.Fresh = "req-2", true
	u, err = scripts.UnlockLock(ctx, rdb, unlock)
	require.NoError(t, err)
	assert.Equal(t, scripts.Released, u.State)
	assert.Zero(t, rdb.Exists(ctx, name).Val())
	unlock.Fresh = false
	u, err = scripts.UnlockLock(ctx, rdb, unlock)
	require.NoError(t, err)
	assert.Equal(t, scripts.Released, u.State, "the retry reports the first attempt's release")
	assert.Zero(t, u.Heard, "and announces nothing again")

	// A request id not seen before, not fresh, finds no latch and no hold.
	unlock.RequestID = "req-3"
	u, err = scripts.UnlockLock(ctx, rdb, unlock)
	require.NoError(t, err)
	assert.Equal(t, scripts.NotOwner, u.State)
}
