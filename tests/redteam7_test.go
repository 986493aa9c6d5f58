package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The seventh red-team pass, over the fixes of the sixth: each test failed
// before its defect was fixed.

// RT7-1. rw_renew pexpires every read-hold key the owner carries to the
// watchdog lease, a read taken with a LeaseTime longer than the watchdog
// lease too: it shortens that key. The runtime's renewed keeps the longer
// deadline (max), so once the watchdog read is released the read left is
// valid for its own LeaseTime while the read release pexpired the lock to
// its (shortened) key, which expires a watchdog lease after the renewal: a
// writer gets in while Held.ValidUntil is seconds ahead and Err is nil.
func TestRedTeam7RenewalShortensALongReadKey(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	_, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt7-renewal-shortens-long-read"
	read := rt.ReadWriteLock(name).ReadLocker()
	long, err := read.Acquire(ctx, actorlock.LeaseTime(6*time.Second))
	require.NoError(t, err)
	wd, err := read.Acquire(long.Context()) // a watchdog re-entry
	require.NoError(t, err)
	keyOne := fmt.Sprintf("{%s}:%s:rwlock_timeout:1", name, long.Owner())
	// Wait for a renewal carrying both reads.
	deadline := time.Now().Add(3 * time.Second)
	for direct.PTTL(ctx, keyOne).Val() > 2*watchdog && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("key 1 pttl after a renewal: %v (its LeaseTime is 6s)", direct.PTTL(ctx, keyOne).Val())
	require.NoError(t, wd.Unlock(ctx))
	t.Logf("after the watchdog read's Unlock: lock pttl %v, long valid for %v", direct.PTTL(ctx, name).Val(), time.Until(long.ValidUntil()))
	w, err := other.ReadWriteLock(name).WriteLocker().Acquire(ctx, actorlock.WaitTime(3*time.Second))
	require.NoError(t, err, "a writer gets in")
	defer w.Unlock(ctx)
	validFor := time.Until(long.ValidUntil())
	t.Logf("writer in; the long read: Err %v, valid for %v more", long.Err(), validFor)
	require.True(t, long.Err() != nil && validFor <= 0, "a writer holds the lock while the read is valid for %v more (Err %v)", validFor, long.Err())
}

// RT7-2. A short LeaseTime read first, a watchdog re-entry after it. Once
// the short read's key (key 1) has expired, Unlock of the short read runs
// rw_read_unlock, which deletes the owner's newest key (key 2, the
// watchdog read's, live) and, finding only dead keys left, the lock. The
// runtime learns that from the reply ("freed") and ends the watchdog read,
// but only then: releasingReads shortens the reads left only when nothing
// renews them (readsOnlyUntil: watchdogs == 0), so while the reply is late
// the watchdog read stays valid, renewed, with the lock deleted in Redis
// and a writer in.
func TestRedTeam7ReleaseInFlightDeletesTheWatchdogReadsKey(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt7-release-in-flight-watchdog-read"
	read := rt.ReadWriteLock(name).ReadLocker()
	short, err := read.Acquire(ctx, actorlock.LeaseTime(150*time.Millisecond))
	require.NoError(t, err)
	wd, err := read.Acquire(short.Context())
	require.NoError(t, err)
	time.Sleep(400 * time.Millisecond)
	require.NoError(t, wd.Err())
	slow := p.on(1, delayReply, 1500*time.Millisecond, func(c respCommand) bool { return isRelease(c, name, short.Owner(), false) })
	go func() { t.Logf("short Unlock: %v", short.Unlock(ctx)) }()
	await(t, slow.hits, 2*time.Second, "the read release")
	time.Sleep(100 * time.Millisecond)
	t.Logf("Redis after the release ran: %v (exists %v)", direct.HGetAll(ctx, name).Val(), direct.Exists(ctx, name).Val())
	w, err := other.ReadWriteLock(name).WriteLocker().TryAcquire(ctx)
	require.NoError(t, err, "a writer gets in")
	defer w.Unlock(ctx)
	validFor := time.Until(wd.ValidUntil())
	t.Logf("writer in; the watchdog read: Err %v, valid for %v", wd.Err(), validFor)
	require.False(t, wd.Err() == nil && validFor > 0, "a writer holds the lock while the watchdog read is valid for %v more", validFor)
}

// RT7-3. rw_renew counts the owner's keys only up to the first missing
// one, yet renews every key after it in Redis. With a short read's key 1
// dead, the watchdog read's key 2 is kept alive by every renewal, but the
// runtime never moves its deadline past the read's first lease. Once the
// watchdog read is unlocked (Redis deletes the newest key, a fresh read's,
// and keeps the lock as long as key 2), the reads left are judged by that
// stale deadline: a read granted a moment ago with a LeaseTime of 2 s ends
// at once with ErrLost (and is given back), with no fault at all.
func TestRedTeam7RenewedKeyAfterADeadOneIsNotCounted(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	_, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt7-renewed-key-after-dead-one"
	read := rt.ReadWriteLock(name).ReadLocker()
	short, err := read.Acquire(ctx, actorlock.LeaseTime(150*time.Millisecond))
	require.NoError(t, err)
	wd, err := read.Acquire(short.Context())
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond) // renewals keep key 2, not key 1
	fresh, err := read.Acquire(short.Context(), actorlock.LeaseTime(2*time.Second))
	require.NoError(t, err)
	keyTwo := fmt.Sprintf("{%s}:%s:rwlock_timeout:2", name, short.Owner())
	t.Logf("before the Unlock: key 2 (the watchdog read's) pttl %v, fresh valid for %v", direct.PTTL(ctx, keyTwo).Val(), time.Until(fresh.ValidUntil()))
	require.NoError(t, wd.Unlock(ctx))
	time.Sleep(50 * time.Millisecond)
	t.Logf("Redis: %v, lock pttl %v, key 2 pttl %v; fresh: Err %v, valid for %v",
		direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val(), direct.PTTL(ctx, keyTwo).Val(), fresh.Err(), time.Until(fresh.ValidUntil()))
	require.NoError(t, fresh.Err(), "a read granted 50 ms ago for 2 s, its owner's lock alive in Redis, ended")
}
