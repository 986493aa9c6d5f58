package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// The sixth red-team pass, over the fixes of the fifth and findings AC and
// AD: each test failed before its defect was fixed. (RT6-1 and RT6-3 came
// from AD's first fix, which ended an owner's holds when any of its
// read-hold keys had expired: rw_renew now reports how many keys it
// renewed, and the runtime counts only those.)

// isRWRenewOf reports whether c is an rw_renew call whose one entry is
// name, carrying reads read holds (ARGV: lease, owner, owner:write, reads,
// prefix).
func isRWRenewOf(c respCommand, name, reads string) bool {
	keys, argv, ok := c.script()
	return ok && len(keys) == 1 && keys[0] == name && !guarded(keys) && len(argv) == 5 &&
		argv[2] == argv[1]+":write" && argv[3] == reads
}

// RT6-1. rw_renew now reports the owner gone when any of its read-hold keys
// 1..count has expired. A read taken with a short LeaseTime under a hold the
// watchdog renews (a writer's downgrade, or a re-entry of a watchdog read)
// expires on its own lease whenever the next renewal comes after it, which
// is the normal case for a LeaseTime below a third of the watchdog lease:
// the renewal then declares the whole hold gone, and the write hold (whose
// field, mode=write, and lease are all there) ends as lost. Nothing gives it
// back (renewGone: lost, not abandonHold): Redis keeps the write for the
// rest of its lease, held by nobody.
func TestRedTeam6ShortReadUnderAWatchdogWriteEndsTheWrite(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt6-short-read-under-write"
	rw := rt.ReadWriteLock(name)
	w, err := rw.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	// The first renewal that carries the read reaches Redis after the
	// read's own lease (as any renewal later than 100 ms would).
	late := p.on(1, holdCommand, 300*time.Millisecond, func(c respCommand) bool { return isRWRenewOf(c, name, "1") })
	r, err := rw.ReadLocker().Acquire(w.Context(), actorlock.LeaseTime(100*time.Millisecond))
	require.NoError(t, err)
	await(t, late.ran, 3*time.Second, "the renewal carrying the read")
	time.Sleep(200 * time.Millisecond)
	t.Logf("Redis: %v (pttl %v); read Err %v", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val(), r.Err())
	require.Equal(t, "1", direct.HGet(ctx, name, w.Owner()+":write").Val(), "Redis still has the write")
	require.NoError(t, w.Err(), "the write hold is fine in Redis, yet ended")
	require.NoError(t, w.Unlock(ctx))
}

// RT6-1b. The same with two reads of one owner: a watchdog read, and a
// re-entry with a short LeaseTime. The first read's key is renewed and
// keeps the lock, yet the renewal after the second read's lease ends both.
func TestRedTeam6ShortReentryUnderAWatchdogReadEndsTheRead(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 20*time.Second)
	const name = "rt6-short-reentry-under-read"
	read := rt.ReadWriteLock(name).ReadLocker()
	r1, err := read.Acquire(ctx)
	require.NoError(t, err)
	late := p.on(1, holdCommand, 300*time.Millisecond, func(c respCommand) bool { return isRWRenewOf(c, name, "2") })
	r2, err := read.Acquire(r1.Context(), actorlock.LeaseTime(100*time.Millisecond))
	require.NoError(t, err)
	await(t, late.ran, 3*time.Second, "the renewal carrying both reads")
	time.Sleep(200 * time.Millisecond)
	keyOne := fmt.Sprintf("{%s}:%s:rwlock_timeout:1", name, r1.Owner())
	t.Logf("Redis: %v (pttl %v), key 1 pttl %v; r2 Err %v", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val(), direct.PTTL(ctx, keyOne).Val(), r2.Err())
	require.Positive(t, direct.PTTL(ctx, keyOne).Val(), "the first read's key lives")
	require.NoError(t, r1.Err(), "the watchdog read is fine in Redis, yet ended")
	require.NoError(t, r1.Unlock(ctx))
}

// RT6-3. When rw_renew finds one of the owner's read-hold keys expired it
// now answers "gone" although the lock and the owner's other holds live on
// in Redis; the runtime takes that answer as the lock being gone
// (renewGone: lost, no give-back), so nothing releases what Redis still
// counts. A writer whose downgrade holds a short read and a long LeaseTime
// read: once the short read's key has expired before a renewal, the whole
// hold ends as lost and Redis keeps the write (and the long read's key,
// which stretched the lock) for the long read's whole lease, held by
// nobody: no writer gets in for a minute (docs/guarantees.md,
// "A lost hold is given back": "released in Redis as soon as Redis
// answers").
func TestRedTeam6HoldEndedByADeadReadKeyIsNotGivenBack(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	p, direct, rt := proxied(t, actorlock.WithWatchdog(watchdog))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt6-dead-read-key-not-given-back"
	rw := rt.ReadWriteLock(name)
	w, err := rw.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	late := p.on(1, holdCommand, 300*time.Millisecond, func(c respCommand) bool { return isRWRenewOf(c, name, "2") })
	_, err = rw.ReadLocker().Acquire(w.Context(), actorlock.LeaseTime(100*time.Millisecond))
	require.NoError(t, err)
	long, err := rw.ReadLocker().Acquire(w.Context(), actorlock.LeaseTime(time.Minute))
	require.NoError(t, err)
	await(t, late.ran, 3*time.Second, "the renewal carrying both reads")
	time.Sleep(200 * time.Millisecond)
	// A read key that expired on its own lease ends nothing else: the
	// write and the long read live on, in Redis and here.
	require.NoError(t, w.Err(), "the write is held")
	require.NoError(t, long.Err(), "the long read is held")
	require.Equal(t, "1", direct.HGet(ctx, name, w.Owner()+":write").Val(), "Redis has the write")
	require.NoError(t, long.Unlock(ctx))
	require.NoError(t, w.Unlock(ctx))
	freedWithin(t, ctx, direct, name, 3*time.Second, "the last holds' Unlocks free the lock")
	h, err := other.ReadWriteLock(name).WriteLocker().TryAcquire(ctx)
	require.NoError(t, err, "another writer gets the free lock")
	assert.NoError(t, h.Unlock(ctx))
}

// RT6-2. stop answers the releases it finds in flight, queued or parked,
// but only through fail, which answers once (told): a ReleaseRequest sent
// again with its request_id after it was told of a failure joins the
// release under way (releaseMessage: g.release.join) and waits for its
// outcome. If that release is being settled (its replies lost) when Close
// stops the actor, the in-flight step is the settleStep, not the
// releaseStep, and no list stop walks holds it; drain's releaseAll, which
// would answer it, sees only the holds still there, and this one ended
// (its lease_ms) meanwhile. The owner actor never gets an answer to its
// second ReleaseRequest (docs/guarantees.md: Close "answers every release
// still to run or in flight, by message too").
func TestRedTeam6JoinedReleaseByMessageIsAnsweredAtClose(t *testing.T) {
	t.Parallel()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	p, _, rt := proxied(t, actorlock.WithCallTimeout(time.Second), actorkit.WithActorSystem(sys))
	const name = "rt6-joined-release-by-message"
	owner := spawnProbe(t, sys)
	owner.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "a1", Name: name, Kind: messages.Kind_KIND_LOCK, LeaseMs: 4000})
	resp := receive[*messages.AcquireResponse](t, owner, 3*time.Second)
	require.True(t, resp.Acquired, "%v", resp.Error)
	ownerID := resp.Owner

	// Every reply to the release and to its settling is lost.
	p.on(1000, dropReply, 0, func(c respCommand) bool { return isRelease(c, name, ownerID, false) })
	owner.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "r1", Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: resp.OwnerToken})
	first := receive[*messages.ReleaseResponse](t, owner, 5*time.Second)
	require.NotNil(t, first.Error, "the release's outcome is unknown: %v", first)
	t.Logf("first answer: %v", first.Error)
	// The owner asks again with the same request id: it joins the release.
	owner.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: "r1", Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: resp.OwnerToken})
	lost := receive[*messages.LockLost](t, owner, 6*time.Second) // its lease_ms ran out
	t.Logf("lost: %s", lost.Reason)

	closeCtx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t.Logf("Close: %v", rt.Close(closeCtx))
	rel := receive[*messages.ReleaseResponse](t, owner, 5*time.Second)
	t.Logf("second answer: %v", rel)
	assert.Equal(t, "r1", rel.RequestId)
}
