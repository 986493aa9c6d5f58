package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// The tenth red-team pass, over b283e33 (RT9-1: outlived, zombie grants).

// RT10-1. admit answers an AcquireRequest sent again after its answer with
// that answer only while the grant it named is still in the hold and
// outlasts (lock.go: admit). Fixed by letting a release name its
// acquisition (ReleaseRequest.fencing_token): replaying the first answer
// after a release took the grant (this pass's first fix) tells the client
// of a grant it does not hold (RT11-1, RT11-2). A release by message releases the owner's
// newest acquisition of the kind, whichever the client meant, so the grant
// whose answer the client lost may be the one released: the client, which
// knows a1 only, releases "one hold" while a2's answer is lost, then sends
// a2 again. The retry falls through to a fresh re-entry: Redis counts two
// holds, the client knows of one, and after its one release the owner still
// holds the lock, renewed for as long as its keeper lives
// (docs/guarantees.md, Exactly once: "sent again with the same request_id
// after its answer gets the first answer while the owner holds the lock,
// and acquires or releases nothing more").
func TestRedTeam10RetriedAcquireAfterItsGrantWasReleasedAcquiresAgain(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)
	const name = "rt10-retried-acquire-after-release"

	acquire := func(id, token string) *messages.AcquireResponse {
		return ask[*messages.AcquireResponse](t, rt, p, &messages.AcquireRequest{RequestId: id, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: token})
	}
	release := func(id, token string, fencing int64) *messages.ReleaseResponse {
		return ask[*messages.ReleaseResponse](t, rt, p, &messages.ReleaseRequest{RequestId: id, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: token, FencingToken: fencing})
	}
	r1 := acquire("a1", "")
	require.True(t, r1.Acquired)
	token := r1.OwnerToken
	owner, err := actorkit.TokenOwner(rt, token)
	require.NoError(t, err)
	r2 := acquire("a2", token) // its answer is "lost" to the client
	require.True(t, r2.Acquired)

	// The client releases the hold it knows of, a1, naming it (without a
	// name the release takes the newest, a2, and the retry below asks
	// for a new hold: lock.proto).
	rel := release("r1", token, r1.FencingToken)
	require.Nil(t, rel.Error)
	require.EqualValues(t, 1, rel.HoldCount)

	// a2 sent again: the owner holds the lock, so it must get its first
	// answer and acquire nothing more.
	again := acquire("a2", token)
	require.True(t, again.Acquired)
	n, err := rdb.HGet(ctx, name, owner).Int()
	require.NoError(t, err)
	t.Logf("first answer: token %d count %d; retry: token %d count %d; Redis counts %d",
		r2.FencingToken, r2.HoldCount, again.FencingToken, again.HoldCount, n)
	assert.Equal(t, r2.FencingToken, again.FencingToken, "the retry of a2 got a new grant, not its first answer")
	require.Equal(t, 1, n, "Redis counts a hold the client never learnt of")

	// The client releases the one hold it believes it has: the lock must
	// be free.
	last := release("r2", token, again.FencingToken)
	require.Nil(t, last.Error)
	exists, err := rdb.Exists(ctx, name).Result()
	require.NoError(t, err)
	require.Zero(t, exists, "the owner released every hold it knows of, and the lock is still held")
}
