package tests

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The thirtieth red-team pass, over b26529f (RT29-1: every release carries
// its hold's validity as its deadline in Redis; RT29-2: a newer give-back's
// token goes to a WithOwner id's older give-backs only if seen before their
// holds' validity).

// RT30-1 (liveness, a documented promise broken): RT29-2 keeps a newer
// sight's token from a WithOwner id's older give-back whenever the newer
// give-back is queued after the older one's holds' validity. A hold lost at
// its validity (expireHolds) has validTo <= now, so every newer give-back
// queued after its loss keeps its token: always. Here one runtime alone uses
// the WithOwner id X. X holds with a 1.5 s LeaseTime and re-enters (the
// watchdog); the re-entry runs in Redis while the outer hold is there (count
// 2, token T2, PX the watchdog lease) but its reply comes after the outer
// hold's validity. The outer hold is lost, its give-back U1 (count 1, T1)
// queued; the re-entry's grant comes back while U1 is out and is given back
// (U2: count 2, T2), which no longer hands T2 to U1. U2 runs (count 1); U1
// is refused by token and dropped. X's count 1 stays in Redis for the
// re-entry's watchdog lease, held by nobody; X's next acquisition re-enters
// it (docs/guarantees.md, "A lost hold is given back": "the same owner's
// next acquisition waits, and then starts a fresh hold; it never re-enters
// the lost one"), its renewals keep the stranded count alive, and after its
// Unlock (nil) the lock stays held by nobody for another watchdog lease.
// Before b26529f U2 handed T2 to U1, which gave the hold back.
func TestRedTeam30LateReentryStrandsALostHoldOfAWithOwnerID(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 60*time.Second)
	const name, owner = "rt30-late-reentry-strands", "owner-rt30-1"
	l1 := rt1.Lock(name, actorlock.WithOwner(owner))
	outer, err := l1.Acquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond)
	// The re-entry runs in Redis at once; its reply comes 1.3 s late, after
	// the outer hold's validity (within its call's 3 s).
	late := p.on(1, delayReply, 1300*time.Millisecond, func(c respCommand) bool { return isGuardedAcquire(c, name, owner) && !settling(c) })
	reentryOutlivesItsOuterHold(t, ctx, l1, outer, late)
	time.Sleep(500 * time.Millisecond) // the give-backs run
	// Nobody holds X here.
	lostHoldIsGivenBack(t, ctx, direct, other, l1, name, owner)
}

// reentryOutlivesItsOuterHold re-enters through l1 (TryAcquire, the
// watchdog's lease) while late holds the re-entry's script or reply back,
// and waits for the outer hold to end (lost at its validity) and for the
// re-entry's answer, which it unlocks if granted.
func reentryOutlivesItsOuterHold(t *testing.T, ctx context.Context, l1 *actorlock.Lock, outer *actorlock.Held, late *proxyRule) {
	reentered := make(chan gotHold, 1)
	go func() {
		h, err := l1.TryAcquire(ctx) // the watchdog's lease
		reentered <- gotHold{h, err}
	}()
	await(t, late.hits, 2*time.Second, "the re-entry, on its way")
	select {
	case <-outer.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the outer hold's Done stays open past its validity")
	}
	got := await(t, reentered, 3*time.Second, "the re-entry's answer")
	t.Logf("the re-entry: %v", got.err)
	if got.err == nil {
		require.NoError(t, got.h.Unlock(ctx))
	}
}

// lostHoldIsGivenBack: once the give-backs of owner's lost hold and of its
// late re-entry ran, nothing of owner is left: its next acquisition (l1)
// starts a fresh hold, and after its Unlock another owner gets the lock.
func lostHoldIsGivenBack(t *testing.T, ctx context.Context, direct *redis.Client, other *actorlock.Runtime, l1 *actorlock.Lock, name, owner string) {
	t.Logf("Redis after the give-backs: %v (PTTL %v)", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	again, err := l1.Acquire(ctx, actorlock.WaitTime(5*time.Second))
	require.NoError(t, err)
	t.Logf("X again: Redis %v", direct.HGetAll(ctx, name).Val())
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "X's next acquisition starts a fresh hold, never re-entering the lost one")
	require.NoError(t, again.Unlock(ctx))
	h, err := other.Lock(name).Acquire(ctx, actorlock.WaitTime(2*time.Second))
	if err == nil {
		_ = h.Unlock(ctx)
	}
	require.NoError(t, err, "another owner, after X's only Held was unlocked (Redis: %v, PTTL %v)", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
}
