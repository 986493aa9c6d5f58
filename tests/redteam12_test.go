package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// The twelfth red-team pass, over 0d686b1 (ReleaseRequest.fencing_token;
// admit replays a first answer only while its grant is held, unreleased).

// RT12-1. An acquisition id used again after its grant was released (the
// change says it "asks for a new one") is remembered a second time in the
// owner's recent answers (remember appends, whatever ids it holds), and
// answered looks them up oldest first. The client's retry of that second
// request (its answer lost) meets the first answer, whose grant is gone,
// so admit acquires once more: Redis counts a hold the client never learns
// of, renewed by the watchdog for as long as the owner actor lives.
func TestRedTeam12RetryOfAReusedAcquireIDAcquiresAgain(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)
	const name = "rt12-reused-acquire-id-retried"

	acquire := func(id, token string) *messages.AcquireResponse {
		return ask[*messages.AcquireResponse](t, rt, p, &messages.AcquireRequest{RequestId: id, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: token})
	}
	release := func(id, token string, fencing int64) *messages.ReleaseResponse {
		return ask[*messages.ReleaseResponse](t, rt, p, &messages.ReleaseRequest{RequestId: id, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: token, FencingToken: fencing})
	}
	a0 := acquire("a0", "")
	require.True(t, a0.Acquired)
	token := a0.OwnerToken
	a1 := acquire("a1", token)
	require.True(t, a1.Acquired)
	require.Nil(t, release("r1", token, a1.FencingToken).Error) // a1's grant released, by name

	second := acquire("a1", token) // the id used again: a new acquisition; say its answer is lost
	require.True(t, second.Acquired)
	require.NotEqual(t, a1.FencingToken, second.FencingToken)
	retry := acquire("a1", token) // sent again after its answer: that answer, nothing more
	t.Logf("second a1: token %d count %d; its retry: token %d count %d", second.FencingToken, second.HoldCount, retry.FencingToken, retry.HoldCount)

	// The client releases what it knows of: its retry's answer and a0.
	require.Nil(t, release("r2", token, retry.FencingToken).Error)
	require.Nil(t, release("r3", token, a0.FencingToken).Error)
	n, err := rdb.Exists(ctx, name).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the client released every acquisition it was told of, and its owner still holds the lock (hold count %s): the retry of a1 acquired anew (token %d, the second a1's was %d)",
		rdb.HGet(ctx, name, ownerOf(t, rt, token)).Val(), retry.FencingToken, second.FencingToken)
}

// RT12-2. A ReleaseRequest naming (fencing_token) an acquisition whose
// release is under way joins that release, but its answer is not
// remembered under its own request_id (only the first request's is). Its
// retry, the answer lost, is then refused as NOT_OWNER while the owner
// still holds the lock, against lock.proto ("Sent again with the same
// request_id ... it gets the first answer ... while the owner still holds
// the lock"): a client told NOT_OWNER takes its hold for gone.
func TestRedTeam12RetryOfAReleaseThatJoinedAnotherIsRefused(t *testing.T) {
	t.Parallel()
	px, rdb, rt := proxied(t)
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)
	const name = "rt12-joined-release-retried"

	acquire := func(id, token string) *messages.AcquireResponse {
		return ask[*messages.AcquireResponse](t, rt, p, &messages.AcquireRequest{RequestId: id, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: token})
	}
	send := func(id, token string, fencing int64) {
		p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: id, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: token, FencingToken: fencing})
	}
	a0 := acquire("a0", "")
	require.True(t, a0.Acquired)
	token := a0.OwnerToken
	owner := ownerOf(t, rt, token)
	a1 := acquire("a1", token)
	require.True(t, a1.Acquired)

	late := px.on(1, holdCommand, 500*time.Millisecond, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	send("r1", token, a1.FencingToken)
	await(t, late.hits, 3*time.Second, "r1's release")
	send("r2", token, a1.FencingToken) // its client gave up on r1: the same acquisition, a request of its own
	got := map[string]*messages.ReleaseResponse{}
	for len(got) < 2 {
		r := receive[*messages.ReleaseResponse](t, p, 3*time.Second)
		got[r.RequestId] = r
	}
	require.Nil(t, got["r1"].Error)
	require.Nil(t, got["r2"].Error, "r2 joined r1")
	require.Equal(t, "1", rdb.HGet(ctx, name, owner).Val(), "one release ran")

	send("r2", token, a1.FencingToken) // r2's answer was lost: sent again
	again := receive[*messages.ReleaseResponse](t, p, 3*time.Second)
	require.Equal(t, "1", rdb.HGet(ctx, name, owner).Val(), "nothing more was released")
	require.Nil(t, again.Error, "r2 sent again while its owner holds the lock (a0): its first answer was %+v", got["r2"])
	require.Equal(t, got["r2"].HoldCount, again.HoldCount)
}
