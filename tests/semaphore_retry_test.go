package tests

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/scripts"
)

// A permit-expirable acquire whose reply was lost is re-attempted; when the
// re-attempt reaches Redis after the first attempt's permit expired, it
// must not report that expired permit as acquired (anyone may reclaim it:
// two holders of a one-permit semaphore), but take a permit afresh.
func TestRetriedPermitAcquireAfterItsLeaseTakesAFreshPermit(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, lease = "sem-late-retry", 300 * time.Millisecond
	s := rt.PermitExpirableSemaphore(name)
	ok, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	id, got, err := s.TryAcquire(ctx, time.Minute) // loads the script
	require.NoError(t, err)
	require.True(t, got)
	require.NoError(t, s.Release(ctx, id))

	leaseArg := strconv.FormatInt(lease.Milliseconds(), 10)
	acquire := func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && len(keys) == 3 && keys[0] == name && len(argv) > 0 && argv[0] == leaseArg
	}
	dropped := p.on(1, dropReply, 0, acquire)
	held := p.on(1, holdCommand, 2*lease, acquire)
	id, err = s.Acquire(ctx, lease)
	require.NoError(t, err)
	await(t, dropped.hits, time.Second, "the first attempt")
	await(t, held.hits, time.Second, "the re-attempt")

	expiry, err := direct.ZScore(ctx, scripts.PermitTimeoutKey(name), mustRaw(t, id)).Result()
	require.NoError(t, err, "the permit handed out is recorded")
	assert.Greater(t, int64(expiry), serverMs(t, ctx, direct), "and not expired when handed out")
	_, again, err := other.PermitExpirableSemaphore(name).TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	assert.False(t, again, "one permit, one holder")
	require.NoError(t, s.Release(ctx, id), "released within its lease")
	n, err := direct.Get(ctx, name).Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the permit count is conserved")
}

func mustRaw(t *testing.T, id string) string {
	t.Helper()
	raw, err := scripts.PermitIDBytes(id)
	require.NoError(t, err)
	return raw
}
