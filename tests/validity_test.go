package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// Held.ValidUntil is the runtime's own deadline: a LeaseTime hold's is its
// lease from when the acquisition was sent, less the drift allowance; a
// watchdog hold's moves on with each renewal; an ended hold's is no later
// than its end. Redis's expiry is always later than it.
func TestValidUntilFollowsTheLeaseAndTheWatchdog(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t, actorlock.WithWatchdog(3*time.Second))
	ctx := ctxFor(t, 30*time.Second)

	before := time.Now()
	fixed, err := rt.Lock("valid-fixed").Acquire(ctx, actorlock.LeaseTime(4*time.Second))
	require.NoError(t, err)
	after := time.Now()
	until := fixed.ValidUntil()
	assert.False(t, until.Before(before.Add(4*time.Second-time.Second)), "about a lease ahead: %v", until.Sub(before))
	assert.False(t, until.After(after.Add(4*time.Second)), "never past the lease from the grant: %v", until.Sub(after))
	pttl := rdb.PTTL(ctx, "valid-fixed").Val()
	assert.True(t, until.Before(time.Now().Add(pttl)), "before Redis lets anyone else in (PTTL %v, valid %v)", pttl, time.Until(until))

	dog, err := rt.Lock("valid-dog").Acquire(ctx)
	require.NoError(t, err)
	first := dog.ValidUntil()
	require.Eventually(t, func() bool { return dog.ValidUntil().After(first) }, 5*time.Second, 50*time.Millisecond,
		"a renewal (every lease/3 = 1 s) moves it on")
	assert.Less(t, time.Until(dog.ValidUntil()), 3*time.Second, "never more than a lease ahead")

	require.NoError(t, dog.Unlock(ctx))
	assert.False(t, dog.ValidUntil().After(time.Now()), "an unlocked hold is valid no longer")
	require.NoError(t, fixed.Unlock(ctx))
	assert.False(t, fixed.ValidUntil().After(time.Now()))
}
