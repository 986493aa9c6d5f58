package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The eighth red-team pass, over b1c98b8 (read holds follow their keys).
// RT8-3 is fixed; RT8-1, RT8-2 and RT8-4 are open (opendefects_test.go).

// RT8-3. Keys past 50 are renewed in Redis but never reported (the mask
// stops at bit 49): an owner whose first 50 reads had short LeaseTimes
// (their keys expired) and whose 51st read is the watchdog's keeps the
// lock in Redis for ever, yet each renewal sets the hold's validity to the
// longest of its keys as counted, the 51st's first lease: the watchdog read
// ends with ErrLost a lease after it was granted, with no fault.
func TestRedTeam8WatchdogReadPastFiftyKeysIsLost(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	_, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt8-watchdog-read-past-fifty"
	read := rt.ReadWriteLock(name).ReadLocker()
	first, err := read.Acquire(ctx, actorlock.LeaseTime(200*time.Millisecond))
	require.NoError(t, err)
	for range 49 {
		_, err := read.Acquire(first.Context(), actorlock.LeaseTime(200*time.Millisecond))
		require.NoError(t, err)
	}
	wd, err := read.Acquire(first.Context())
	require.NoError(t, err)
	grantedAt := time.Now()
	require.Equal(t, "51", direct.HGet(ctx, name, wd.Owner()).Val())
	keyLast := fmt.Sprintf("{%s}:%s:rwlock_timeout:51", name, wd.Owner())
	time.Sleep(time.Until(grantedAt.Add(watchdog * 9 / 10)))
	// Renewals came at a third and two thirds of the lease: Redis renewed
	// key 51 (its own lease would leave it under 100 ms now).
	left := direct.PTTL(ctx, keyLast).Val()
	t.Logf("at 0.9 lease: lock pttl %v, key 51 pttl %v; the watchdog read: Err %v, valid for %v",
		direct.PTTL(ctx, name).Val(), left, wd.Err(), time.Until(wd.ValidUntil()))
	require.Greater(t, left, 300*time.Millisecond, "Redis renews key 51")
	time.Sleep(time.Until(grantedAt.Add(watchdog * 3 / 2)))
	t.Logf("at 1.5 leases: lock pttl %v, key 51 pttl %v; the watchdog read: Err %v", direct.PTTL(ctx, name).Val(), direct.PTTL(ctx, keyLast).Val(), wd.Err())
	require.NoError(t, wd.Err(), "the watchdog read, renewed in Redis, ended")
}
