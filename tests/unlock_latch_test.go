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
// the first outcome instead of releasing a second hold: for the reentrant
// lock, the fair lock, and either side of the read-write lock.
func TestUnlockLatchFreshAttemptAndRetry(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 20*time.Second)
	const owner = "rt:1"
	kinds := []struct {
		name    string
		field   string // where Redis counts the owner's holds
		acquire func(scripts.AcquireArgs) (scripts.Grant, error)
		unlock  func(scripts.UnlockArgs) (scripts.Unlock, error)
	}{
		{"reentrant", owner,
			func(a scripts.AcquireArgs) (scripts.Grant, error) { return scripts.AcquireLock(ctx, rdb, a) },
			func(u scripts.UnlockArgs) (scripts.Unlock, error) { return scripts.UnlockLock(ctx, rdb, u) }},
		{"fair", owner,
			func(a scripts.AcquireArgs) (scripts.Grant, error) {
				return scripts.AcquireFair(ctx, rdb, scripts.FairAcquireArgs{AcquireArgs: a, Wait: 10 * time.Second})
			},
			func(u scripts.UnlockArgs) (scripts.Unlock, error) {
				r, err := scripts.UnlockFair(ctx, rdb, scripts.FairUnlockArgs{UnlockArgs: u, Wait: 10 * time.Second})
				return r.Unlock, err
			}},
		{"write", scripts.RWWriteField(owner),
			func(a scripts.AcquireArgs) (scripts.Grant, error) { return scripts.AcquireWrite(ctx, rdb, a) },
			func(u scripts.UnlockArgs) (scripts.Unlock, error) { return scripts.UnlockWrite(ctx, rdb, u) }},
		{"read", owner,
			func(a scripts.AcquireArgs) (scripts.Grant, error) { return scripts.AcquireRead(ctx, rdb, a) },
			func(u scripts.UnlockArgs) (scripts.Unlock, error) { return scripts.UnlockRead(ctx, rdb, u) }},
	}
	// Subtests one after another: each resets the server's command counts.
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			name := "latch:fresh:" + k.name
			for range 2 {
				g, err := k.acquire(scripts.AcquireArgs{Name: name, Owner: owner, Lease: 10 * time.Second, Seen: -1})
				require.NoError(t, err)
				require.True(t, g.Acquired)
			}
			unlock := scripts.UnlockArgs{Name: name, Owner: owner, RequestID: "req-1", Holds: 1, IfCount: -1, LatchTTL: 10 * time.Second, Fresh: true}
			require.NoError(t, rdb.ConfigResetStat(ctx).Err())
			u, err := k.unlock(unlock)
			require.NoError(t, err)
			assert.Equal(t, scripts.StillHeld, u.State)
			stats, err := rdb.Info(ctx, "commandstats").Result()
			require.NoError(t, err)
			assert.Zero(t, commandCalls(stats, "get"), "a fresh unlock does not read its latch")
			assert.Equal(t, "0", rdb.Get(ctx, "redisson_unlock_latch:{"+name+"}:req-1").Val(), "but writes it")

			// The retry of req-1 (not fresh) finds the latch: the hold it
			// released is not released again.
			unlock.Fresh = false
			u, err = k.unlock(unlock)
			require.NoError(t, err)
			assert.Equal(t, scripts.StillHeld, u.State)
			assert.Equal(t, "1", rdb.HGet(ctx, name, k.field).Val(), "one hold left: the retry released nothing")

			// The last hold: released once; its retry answers Released again.
			unlock.RequestID, unlock.Fresh = "req-2", true
			u, err = k.unlock(unlock)
			require.NoError(t, err)
			assert.Equal(t, scripts.Released, u.State)
			assert.Zero(t, rdb.Exists(ctx, name).Val())
			unlock.Fresh = false
			u, err = k.unlock(unlock)
			require.NoError(t, err)
			assert.Equal(t, scripts.Released, u.State, "the retry reports the first attempt's release")
			assert.Zero(t, u.Heard, "and announces nothing again")

			// A request id not seen before, not fresh, finds no latch and no hold.
			unlock.RequestID = "req-3"
			u, err = k.unlock(unlock)
			require.NoError(t, err)
			assert.Equal(t, scripts.NotOwner, u.State)
		})
	}
}

// The same for a hand-off: a fresh attempt writes the latch without reading
// it, and its retry hands the lock over once.
func TestHandoffLatchFreshAttemptAndRetry(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	ctx := ctxFor(t, 10*time.Second)
	const name = "latch:handoff"
	g, err := scripts.AcquireLock(ctx, rdb, scripts.AcquireArgs{Name: name, Owner: "rt:a", Lease: 10 * time.Second, Seen: -1})
	require.NoError(t, err)
	require.True(t, g.Acquired)
	args := scripts.HandoffArgs{
		Name: name, From: "rt:a", RequestID: "req-h", LatchTTL: 10 * time.Second, Fresh: true,
		To: scripts.AcquireArgs{Owner: "rt:b", Lease: 10 * time.Second, Seen: -1},
	}

	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	h, err := scripts.HandoffLock(ctx, rdb, args)
	require.NoError(t, err)
	require.Equal(t, scripts.Released, h.Released)
	require.True(t, h.Next.Acquired)
	stats, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Zero(t, commandCalls(stats, "get"), "a fresh hand-off does not read its latch")
	assert.Equal(t, "1", rdb.Get(ctx, "redisson_unlock_latch:{"+name+"}:req-h").Val(), "but writes it")

	// The retry (as the actor sends it: not fresh, next's count seen 0)
	// finds the latch and does not count b's hold twice.
	args.Fresh, args.To.Seen = false, 0
	h, err = scripts.HandoffLock(ctx, rdb, args)
	require.NoError(t, err)
	assert.Equal(t, scripts.Released, h.Released)
	assert.True(t, h.Next.Acquired)
	assert.Equal(t, map[string]string{"rt:b": "1"}, rdb.HGetAll(ctx, name).Val())
}
