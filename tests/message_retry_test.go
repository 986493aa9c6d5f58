package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/messages"
)

// An AcquireRequest or ReleaseRequest sent again with the same request id
// after its answer (the client lost the reply) gets the first answer and
// acquires or releases nothing more: Redis counts what the client believes
// it holds, and its releases free the lock.
func TestRetriedRequestsActOnce(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	sys := actorkit.System(rt)
	p := spawnProbe(t, sys)
	const name = "msg-release-retry"

	acquire := func(id, token string) *messages.AcquireResponse {
		p.send(sys, actorkit.PID(rt), &messages.AcquireRequest{RequestId: id, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: token})
		return receive[*messages.AcquireResponse](t, p, 3*time.Second)
	}
	release := func(id, token string) *messages.ReleaseResponse {
		p.send(sys, actorkit.PID(rt), &messages.ReleaseRequest{RequestId: id, Name: name, Kind: messages.Kind_KIND_LOCK, OwnerToken: token})
		return receive[*messages.ReleaseResponse](t, p, 3*time.Second)
	}
	r1 := acquire("a1", "")
	require.True(t, r1.Acquired)
	token := r1.OwnerToken
	r2 := acquire("a2", token)
	require.True(t, r2.Acquired)
	owner, err := actorkit.TokenOwner(rt, token)
	require.NoError(t, err)

	r2again := acquire("a2", token)
	require.True(t, r2again.Acquired, "the retry gets the first answer")
	assert.Equal(t, r2.FencingToken, r2again.FencingToken, "the same grant, not a new one")
	assert.Equal(t, r2.HoldCount, r2again.HoldCount)
	n, err := rdb.HGet(ctx, name, owner).Int()
	require.NoError(t, err)
	require.Equal(t, 2, n, "Redis counts the two acquisitions, not the retry")

	first := release("r1", token)
	require.Nil(t, first.Error)
	require.False(t, first.Released)
	require.EqualValues(t, 1, first.HoldCount)

	again := release("r1", token)
	assert.Nil(t, again.Error)
	assert.Equal(t, first.Released, again.Released, "the retry reports the first outcome")
	assert.Equal(t, first.HoldCount, again.HoldCount, "the retry reports the first outcome")
	n, err = rdb.HGet(ctx, name, owner).Int()
	require.NoError(t, err)
	assert.Equal(t, 1, n, "Redis still counts the re-entry")

	last := release("r2", token)
	require.Nil(t, last.Error, "the re-entry is still the owner's here")
	assert.True(t, last.Released)
	assert.EqualValues(t, 0, last.HoldCount)
	exists, err := rdb.Exists(ctx, name).Result()
	require.NoError(t, err)
	assert.Zero(t, exists, "the lock is free after the last release")
}
