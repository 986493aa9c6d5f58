package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// The eleventh red-team pass, over dd47cac (RT10-1: admit answers a retried
// AcquireRequest with its first answer even after its grant was released).
// Both findings came from that fix, which is undone: a retry gets its
// first answer only while its grant is held, and a release names the
// acquisition it releases (ReleaseRequest.fencing_token), so that it does
// not take the one whose answer the client lost.

// RT11-1. admit answers a retry with the first answer of a grant that a
// release by message released (it takes the newest acquisition), on the
// premise that the grants of an owner are interchangeable: "the client,
// knowing of one hold less, released one of those it knew". They are not:
// each has its own lease. The client holds a1 (watchdog), sends a2 with a
// fixed 300 ms lease and loses its answer, releases a1 (the one it knows):
// the runtime releases a2 (the newest) and keeps a1. a2 sent again is
// answered "acquired, 300 ms": the client now believes it holds one
// fixed-lease hold, lets it expire and releases nothing, while the
// runtime renews a1 for as long as the owner actor lives: the lock is
// never free again.
func TestRedTeam11RetriedAcquireAnsweredWithAReleasedGrantsLease(t *testing.T) {
	t.Parallel()
	const watchdog = time.Second
	_, rdb, rt := setup(t, actorlock.WithWatchdog(watchdog))
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)
	const name = "rt11-retried-acquire-lease"

	acquire := func(id, token string, lease time.Duration) *messages.AcquireResponse {
		return ask[*messages.AcquireResponse](t, rt, p, &messages.AcquireRequest{RequestId: id, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: token, LeaseMs: lease.Milliseconds()})
	}
	release := func(id, token string, fencing int64) *messages.ReleaseResponse {
		return ask[*messages.ReleaseResponse](t, rt, p, &messages.ReleaseRequest{RequestId: id, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: token, FencingToken: fencing})
	}
	r1 := acquire("a1", "", 0) // watchdog
	require.True(t, r1.Acquired)
	token := r1.OwnerToken
	r2 := acquire("a2", token, 300*time.Millisecond) // its answer is "lost"
	require.True(t, r2.Acquired)

	rel := release("r1", token, r1.FencingToken) // the client releases a1, the hold it knows, by name
	require.Nil(t, rel.Error)

	again := acquire("a2", token, 300*time.Millisecond)
	t.Logf("retry of a2: acquired %v ttl %d ms count %d token %d (first: ttl %d token %d)",
		again.Acquired, again.TtlMs, again.HoldCount, again.FencingToken, r2.TtlMs, r2.FencingToken)
	// The client does what it was told: a hold with a fixed lease shorter
	// than the watchdog's expires by itself; one told to be the watchdog's
	// is released.
	told := time.Duration(again.TtlMs) * time.Millisecond
	if again.Acquired && told >= watchdog {
		require.Nil(t, release("r2", token, again.FencingToken).Error)
		told = 0
	}
	deadline := time.Now().Add(told + 700*time.Millisecond)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	n, err := rdb.Exists(ctx, name).Result()
	require.NoError(t, err)
	pttl, _ := rdb.PTTL(ctx, name).Result()
	require.Zero(t, n, "the client holds nothing by what it was told (its only hold's %v lease ran out), and its owner still holds the lock in Redis (pttl %v), renewed", told, pttl)
}

// RT11-2. The same rule, for a request id used again after its answer
// was received and its grant released: the read the client asks for is
// answered "acquired" from the first read's answer, and nothing is
// acquired. The client holds a write and a read (ids w and r), releases
// the read, and asks for a read again under the id r (AcquireRequest has
// no rule against it; only releases are told to use ids of their own):
// "acquired". It then releases its write, believing it still reads, and a
// writer of another owner gets the lock while it reads: two holders.
// Before the change that read was no longer in the hold, so r acquired
// afresh.
func TestRedTeam11ReusedAcquireIDAfterItsReleaseAcquiresNothing(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)
	const name = "rt11-reused-acquire-id"

	acquire := func(id, token string, kind messages.Kind) *messages.AcquireResponse {
		return ask[*messages.AcquireResponse](t, rt, p, &messages.AcquireRequest{RequestId: id, Name: name, Kind: kind, OwnerToken: token})
	}
	release := func(id, token string, kind messages.Kind) *messages.ReleaseResponse {
		return ask[*messages.ReleaseResponse](t, rt, p, &messages.ReleaseRequest{RequestId: id, Name: name, Kind: kind, OwnerToken: token})
	}
	w := acquire("w", "", messages.Kind_KIND_WRITE)
	require.True(t, w.Acquired)
	token := w.OwnerToken
	r := acquire("r", token, messages.Kind_KIND_READ)
	require.True(t, r.Acquired)
	require.Nil(t, release("x1", token, messages.Kind_KIND_READ).Error)

	again := acquire("r", token, messages.Kind_KIND_READ) // a new read
	require.True(t, again.Acquired)
	t.Logf("second read under id r: token %d count %d (first read: token %d)", again.FencingToken, again.HoldCount, r.FencingToken)
	require.Nil(t, release("x2", token, messages.Kind_KIND_WRITE).Error)

	// The client reads now, by what it was told: no other owner may write.
	other, err := rt.ReadWriteLock(name).WriteLocker().TryAcquire(ctx)
	if err == nil {
		defer other.Unlock(ctx)
	}
	require.Error(t, err, "another owner's write was granted while the client was told it holds a read (token %d)", again.FencingToken)
}

// A release naming an acquisition the owner does not hold here is refused,
// and releases nothing; a negative fencing_token is malformed.
func TestReleaseByMessageNamingAnUnknownAcquisitionIsRefused(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)
	const name = "release-naming-an-unknown-acquisition"
	p.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: "a1", Name: name, Kind: messages.Kind_KIND_LOCK})
	r1 := receive[*messages.AcquireResponse](t, p, 3*time.Second)
	require.True(t, r1.Acquired)
	release := func(id string, kind messages.Kind, fencing int64) *messages.ReleaseResponse {
		return ask[*messages.ReleaseResponse](t, rt, p, &messages.ReleaseRequest{RequestId: id, Name: name, Kind: kind, OwnerToken: r1.OwnerToken, FencingToken: fencing})
	}
	for i, c := range []struct {
		kind    messages.Kind
		fencing int64
		code    messages.ErrorCode
	}{
		{messages.Kind_KIND_LOCK, r1.FencingToken + 1, messages.ErrorCode_ERROR_CODE_NOT_OWNER},
		{messages.Kind_KIND_LOCK, -1, messages.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	} {
		res := release(fmt.Sprintf("bad%d", i), c.kind, c.fencing)
		require.NotNil(t, res.Error, "fencing_token %d", c.fencing)
		require.Equal(t, c.code, res.Error.Code, "fencing_token %d: %s", c.fencing, res.Error.Message)
	}
	require.Equal(t, "1", rdb.HGet(ctx, name, ownerOf(t, rt, r1.OwnerToken)).Val(), "nothing was released")
	res := release("good", messages.Kind_KIND_LOCK, r1.FencingToken)
	require.Nil(t, res.Error)
	require.True(t, res.Released)
	require.Zero(t, rdb.Exists(ctx, name).Val())
}

func ownerOf(t *testing.T, rt *actorlock.Runtime, token string) string {
	t.Helper()
	owner, err := actorkit.TokenOwner(rt, token)
	require.NoError(t, err)
	return owner
}
