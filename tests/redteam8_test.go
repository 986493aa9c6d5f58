package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The eighth red-team pass, over b1c98b8 (read holds follow their keys).
// Each test failed before its defect was fixed.

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

// RT8-1. A downgrade whose write release is in flight. The owner holds the
// write (watchdog) and a read with a short LeaseTime. Unlock of the write
// runs in Redis (mode becomes read: only the read's key keeps the lock
// against another reader's release), but its reply is late. Nothing
// shortens the read meanwhile: releasingReads runs only for read releases,
// and readsOnlyUntil declines while h.writes > 0, so the read is valid as
// long as the write was. Once its key expires, another reader's release
// deletes the lock (rw_read_unlock: no live key left) and a writer gets in
// while the read has Err nil and ValidUntil ahead.
func TestRedTeam8WriteReleaseInFlightKeepsTheReadValid(t *testing.T) {
	t.Parallel()
	const watchdog = 3 * time.Second
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt8-write-release-in-flight"
	w, r, readBy := downgraded(t, ctx, rt.ReadWriteLock(name), 300*time.Millisecond)
	slow := p.on(1, delayReply, 2*time.Second, func(c respCommand) bool { return isRelease(c, name, w.Owner()+":write", false) })
	go func() { t.Logf("write Unlock: %v", w.Unlock(ctx)) }()
	await(t, slow.ran, 2*time.Second, "the write release, run by Redis")
	time.Sleep(time.Until(readBy.Add(500 * time.Millisecond))) // the read's key expires
	t.Logf("Redis: %v (pttl %v)", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	// Another reader comes and goes: its release finds no live key left.
	y, err := other.ReadWriteLock(name).ReadLocker().TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, y.Unlock(ctx))
	t.Logf("after another reader: exists %v; the read: Err %v, valid for %v", direct.Exists(ctx, name).Val(), r.Err(), time.Until(r.ValidUntil()))
	othersTry(t, ctx, other.ReadWriteLock(name).WriteLocker(), r, "a writer while the write release's reply is late")
}

// RT8-2. A renewal's mask names keys by number, and numbers are reused.
// The owner writes (watchdog) and reads (watchdog, key 1). A renewal
// carrying that read runs in Redis and finds key 1; its reply is late.
// Meanwhile the read is unlocked (key 1 deleted) and a read with a short
// LeaseTime is taken: key 1 again, with that short lease. The late reply's
// bit 0 then moves h.reads[0] (the short read's) to the watchdog lease.
// Once the write is unlocked, the read alone keeps the lock, for its 300
// ms key, while readsOnlyUntil counts the renewed deadline: another reader's
// release deletes the lock, a writer gets in, and the read is still valid.
func TestRedTeam8RenewalMaskAppliedToAReusedKeyNumber(t *testing.T) {
	t.Parallel()
	const watchdog = 3 * time.Second
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt8-renewal-mask-reused-key"
	rw := rt.ReadWriteLock(name)
	w, err := rw.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	// A first renewal of the write loads the renewal script.
	first := p.on(1, delayReply, 0, func(c respCommand) bool { return isRWRenewOf(c, name, "0") })
	await(t, first.ran, 2*watchdog, "a renewal of the write")
	time.Sleep(50 * time.Millisecond)
	a, err := rw.ReadLocker().Acquire(w.Context())
	require.NoError(t, err)
	late := p.on(1, delayReply, 800*time.Millisecond, func(c respCommand) bool { return isRWRenewOf(c, name, "1") })
	await(t, late.ran, 2*watchdog, "a renewal carrying read key 1, run by Redis")
	keyOne := fmt.Sprintf("{%s}:%s:rwlock_timeout:1", name, w.Owner())
	t.Logf("the renewal ran: key 1 pttl %v", direct.PTTL(ctx, keyOne).Val())
	require.NoError(t, a.Unlock(ctx))
	r, err := rw.ReadLocker().Acquire(w.Context(), actorlock.LeaseTime(300*time.Millisecond))
	require.NoError(t, err)
	readBy := time.Now()
	t.Logf("key 1 re-made: pttl %v", direct.PTTL(ctx, keyOne).Val())
	time.Sleep(900 * time.Millisecond) // the renewal's reply comes
	t.Logf("key 1 pttl %v; the read valid for %v", direct.PTTL(ctx, keyOne).Val(), time.Until(r.ValidUntil()))
	require.NoError(t, w.Unlock(ctx))
	time.Sleep(time.Until(readBy.Add(500 * time.Millisecond)))
	y, err := other.ReadWriteLock(name).ReadLocker().TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, y.Unlock(ctx))
	t.Logf("after another reader: exists %v; the read: Err %v, valid for %v", direct.Exists(ctx, name).Val(), r.Err(), time.Until(r.ValidUntil()))
	othersTry(t, ctx, other.ReadWriteLock(name).WriteLocker(), r, "a writer once the reused key expired")
}

// RT8-4. A renewal confirmed while a read release is in flight undoes
// releasingReads. The owner reads twice: a watchdog read (key 1) and a
// read with a 10 s LeaseTime (key 2). Unlock of the leased read runs in
// Redis (key 2 deleted; the lock lives as long as key 1) and its reply is
// late; releasingReads cut the reads left to key 1. The next renewal
// (carrying 2: the count drops only with the reply) finds key 1, and
// renewed sets the validity to the longest of ALL h.reads, key 2's 10 s
// included, which Redis deleted. Renewals then fail (the runtime's
// connection refused): key 1 and the lock expire within a watchdog lease,
// a writer gets in, and the watchdog read is valid for seconds more.
func TestRedTeam8RenewalDuringAReadReleaseCountsTheDeletedKey(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt8-renewal-during-read-release"
	read := rt.ReadWriteLock(name).ReadLocker()
	wd, err := read.Acquire(ctx)
	require.NoError(t, err)
	long, err := read.Acquire(wd.Context(), actorlock.LeaseTime(10*time.Second))
	require.NoError(t, err)
	// A first renewal of both loads the renewal script.
	first := p.on(1, delayReply, 0, func(c respCommand) bool { return isRWRenewOf(c, name, "2") })
	await(t, first.ran, 2*watchdog, "a renewal of both reads")
	slow := p.on(1, delayReply, 4*time.Second, func(c respCommand) bool { return isRelease(c, name, wd.Owner(), false) })
	go func() { t.Logf("the leased read's Unlock: %v", long.Unlock(ctx)) }()
	await(t, slow.ran, 2*time.Second, "the release of the leased read, run by Redis")
	t.Logf("release sent: the watchdog read valid for %v", time.Until(wd.ValidUntil()))
	confirmed := p.on(1, delayReply, 0, func(c respCommand) bool { return isRWRenewOf(c, name, "2") })
	await(t, confirmed.ran, 2*watchdog, "a renewal during the release")
	p.on(1000, refuse, 0, func(c respCommand) bool { return isRWRenewOf(c, name, "2") || isRWRenewOf(c, name, "1") })
	time.Sleep(50 * time.Millisecond)
	t.Logf("renewal confirmed: the watchdog read valid for %v; Redis %v (pttl %v)", time.Until(wd.ValidUntil()), direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	time.Sleep(watchdog + 100*time.Millisecond) // key 1, and the lock, expire
	t.Logf("exists %v; the watchdog read: Err %v, valid for %v", direct.Exists(ctx, name).Val(), wd.Err(), time.Until(wd.ValidUntil()))
	othersTry(t, ctx, other.ReadWriteLock(name).WriteLocker(), wd, "a writer once key 1 expired")
}
