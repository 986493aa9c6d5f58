package tests

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The ninth red-team pass, over 9c298b2 (hold.releasing, readKey.sent).
// RT9-1 (a false ErrLost): a release cut its hold's validity as it was
// sent, to the read-hold keys it leaves (releasing); when those had
// expired, the validity timer ended the whole hold as lost, the very grant
// being released included, before the release's reply said it was
// released. Now only the grants with no Unlock under way end (outlived);
// the others wait for their release's outcome.

// RT9-1. releasing() shortens a hold's validity to its read keys as the
// release is sent, and nothing gives the validity back once the release is
// known not to have run. The owner writes (watchdog) and reads with a
// short LeaseTime (a downgrade). Unlock of the write is refused (BUSY:
// Redis did nothing); released clears hold.releasing, but the validity
// stays at the read's key, and the release is retried later (with back-off).
// Once the read's key runs out, expireHolds abandons the hold: the write,
// still held in Redis and renewed by the watchdog, ends with ErrLost, and
// the Unlock called again reports ErrLost for a hold still held
// (docs/guarantees.md, Exactly once: "never ErrLost for a hold still held").
func TestRedTeam9RefusedWriteReleaseLosesTheWrite(t *testing.T) {
	t.Parallel()
	const watchdog = 3 * time.Second
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt9-refused-write-release"
	w, r, readBy := downgraded(t, ctx, rt.ReadWriteLock(name), 300*time.Millisecond)
	var busyUntil atomic.Int64
	busyUntil.Store(time.Now().Add(900 * time.Millisecond).UnixNano())
	p.on(1000, busy, 0, func(c respCommand) bool {
		return isRelease(c, name, w.Owner()+":write", false) && time.Now().UnixNano() < busyUntil.Load()
	})
	first := make(chan error, 1)
	go func() { first <- w.Unlock(ctx) }()
	time.Sleep(150 * time.Millisecond)
	t.Logf("the release refused: Redis %v (pttl %v); the write valid for %v", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val(), time.Until(w.ValidUntil()))
	time.Sleep(time.Until(readBy.Add(500 * time.Millisecond))) // the read's key runs out
	t.Logf("Redis: %v (pttl %v); the write: Err %v, valid for %v; the read: Err %v",
		direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val(), w.Err(), time.Until(w.ValidUntil()), r.Err())
	// Nothing failed but the refused release: Redis held the write with
	// ~3 s to live, and the watchdog renews it again (releaseFailed).
	require.NoError(t, w.Err(), "the write, held in Redis for seconds more, ended")
	t.Logf("first Unlock: %v", await(t, first, 5*time.Second, "the first Unlock"))
	time.Sleep(time.Until(time.Unix(0, busyUntil.Load())))
	err := w.Unlock(ctx)
	t.Logf("Unlock again: %v", err)
	require.False(t, errors.Is(err, actorlock.ErrLost), "Unlock again reported ErrLost for a hold still held: %v", err)
}

// RT9-1, reads only (the same root cause, already in releasingReads before
// 9c298b2). The owner reads with a short LeaseTime (key 1) and then with
// the watchdog (key 2). Unlock of the watchdog read is refused (BUSY): key 2
// is still there, renewed, and keeps the lock, but the validity stays cut
// to key 1's lease, and the watchdog read ends with ErrLost when key 1 runs
// out.
func TestRedTeam9RefusedReadReleaseLosesTheRead(t *testing.T) {
	t.Parallel()
	const watchdog = 3 * time.Second
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt9-refused-read-release"
	read := rt.ReadWriteLock(name).ReadLocker()
	short, err := read.Acquire(ctx, actorlock.LeaseTime(300*time.Millisecond))
	require.NoError(t, err)
	readBy := time.Now()
	wd, err := read.Acquire(short.Context())
	require.NoError(t, err)
	var busyUntil atomic.Int64
	busyUntil.Store(time.Now().Add(900 * time.Millisecond).UnixNano())
	p.on(1000, busy, 0, func(c respCommand) bool {
		return isRelease(c, name, wd.Owner(), false) && time.Now().UnixNano() < busyUntil.Load()
	})
	first := make(chan error, 1)
	go func() { first <- wd.Unlock(ctx) }()
	time.Sleep(150 * time.Millisecond)
	t.Logf("the release refused: Redis %v (pttl %v); the watchdog read valid for %v", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val(), time.Until(wd.ValidUntil()))
	time.Sleep(time.Until(readBy.Add(500 * time.Millisecond))) // key 1 runs out; key 2 lives on
	t.Logf("Redis: %v (pttl %v); the watchdog read: Err %v", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val(), wd.Err())
	require.NoError(t, wd.Err(), "the watchdog read, whose key keeps the lock in Redis, ended")
	t.Logf("first Unlock: %v", await(t, first, 5*time.Second, "the first Unlock"))
}

// RT9-1, what the fix must keep: the write's release held back in flight
// past the short read's key. The read ends when its key runs out, before
// the release reaches Redis (had it run, another reader's release could
// delete the lock); the write waits for its release's outcome, a success;
// and what Redis still counts of the read is given back at once, not held
// for the write's lease.
func TestRedTeam9ReleaseInFlightPastTheReadsKeyEndsOnlyTheRead(t *testing.T) {
	t.Parallel()
	const watchdog, lease, delay = 3 * time.Second, 300 * time.Millisecond, 1500 * time.Millisecond
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt9-release-in-flight-past-the-read"
	w, r, _ := downgraded(t, ctx, rt.ReadWriteLock(name), lease)
	late := p.on(1, holdCommand, delay, func(c respCommand) bool { return isRelease(c, name, w.Owner()+":write", false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- w.Unlock(ctx) }()
	await(t, late.hits, 3*time.Second, "the write's release")
	select {
	case <-r.Done():
		require.ErrorIs(t, r.Err(), actorlock.ErrLost)
	case <-late.ran:
		t.Fatal("the write's release reached Redis while the read, whose key had run out, was still held")
	}
	require.NoError(t, w.Err(), "the write, whose Unlock is under way, ended")
	require.NoError(t, await(t, unlocked, 5*time.Second, "the write's Unlock"))
	freedWithin(t, ctx, direct, name, time.Second, "the read's hold given back once the write was released")
}
