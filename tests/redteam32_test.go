package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The thirty-second red-team pass, over 6e4b49f..a854403 (RT29-1: every
// release carries its hold's validity as its deadline in Redis; RT29-2,
// RT30-1: a newer give-back's token goes to a WithOwner id's older
// give-backs only if its grant ran before their validity, by the server
// clock's estimate; RT31-1: the estimate takes each reading as a range).

// RT32-1 (API, a documented promise broken): a release that reaches Redis
// after its hold's validity is refused there (Guard.Until), and its Unlock
// is to report ErrLost (docs/guarantees.md, "Exactly once": "its Unlock
// reports ErrLost"). releaseFailed turns the refusal into ErrLost only
// while the hold is still known (h != nil). But the refusal comes, by
// construction, after the hold's validity, and the validity timer has
// fired by then (expireHolds: the release's cut is no longer than its
// uncut validity for an exclusive lock), abandoning the hold: h is nil,
// and the Unlock reports the internal scripts.ErrNotRun ("the request did
// not run in Redis"), neither ErrLost nor any exported sentinel. Here X
// holds (1.5 s LeaseTime); its Unlock's release reaches Redis 2.5 s late.
func TestRedTeam32LateUnlockReportsNotRunInsteadOfErrLost(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt32-late-unlock-reports"
	h, err := rt.Lock(name).Acquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
	require.NoError(t, err)
	held := p.on(1, holdCommand, 2500*time.Millisecond, func(c respCommand) bool { return isRelease(c, name, h.Owner(), false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- h.Unlock(ctx) }()
	await(t, held.hits, 2*time.Second, "the Unlock's release, on its way (held back)")
	await(t, held.ran, 4*time.Second, "the release reaches Redis, after the hold's validity")
	err = await(t, unlocked, 3*time.Second, "the Unlock's answer")
	t.Logf("Unlock: %v; Held.Err: %v; Redis: %v", err, h.Err(), direct.HGetAll(ctx, name).Val())
	require.Error(t, err, "the release was refused in Redis")
	assert.ErrorIs(t, err, actorlock.ErrLost, "an Unlock refused past its hold's validity reports ErrLost")
}

// RT29-1's other paths, which held: they guard its fix.

// RT29-1 for a hand-off. X holds (1.5 s LeaseTime) with a
// local waiter Y of another owner; X's Unlock hands the lock to Y in one
// script, held back 2.5 s on its way. X's hold expires in Redis and
// runtime 2 takes the WithOwner id X afresh; the late hand-off must be
// refused (past X's validity), not delete runtime 2's hold and grant Y.
func TestRedTeam32LateHandoffSparesAFreshHoldOfItsOwnerID(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	rt2 := newRuntime(t, direct)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt32-late-handoff", "owner-rt32-1"
	h1, err := rt1.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
	require.NoError(t, err)
	waiter := make(chan gotHold, 1)
	go func() {
		h, err := rt1.Lock(name).Acquire(ctx, actorlock.WaitTime(8*time.Second), actorlock.LeaseTime(5*time.Second))
		waiter <- gotHold{h, err}
	}()
	time.Sleep(200 * time.Millisecond) // Y waits
	held := p.on(1, holdCommand, 2500*time.Millisecond, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- h1.Unlock(ctx) }()
	got := await(t, held.hits, 2*time.Second, "the Unlock's hand-off, on its way (held back)")
	_, argv, _ := got.script()
	t.Logf("held back: %v", argv)
	freedWithin(t, ctx, direct, name, 3*time.Second, "runtime 1's hold expires")
	h2, err := rt2.Lock(name, actorlock.WithOwner(owner)).Acquire(ctx, actorlock.LeaseTime(20*time.Second))
	require.NoError(t, err)
	await(t, held.ran, 3*time.Second, "the hand-off reaches Redis")
	t.Logf("runtime 1's Unlock: %v", await(t, unlocked, 3*time.Second, "the Unlock's answer"))
	t.Logf("Redis after the late hand-off: %v", direct.HGetAll(ctx, name).Val())
	select {
	case w := <-waiter:
		if w.err == nil {
			requireNotBoth(t, h2, w.h, "the waiter while runtime 2 holds")
			_ = w.h.Unlock(ctx)
		}
	case <-time.After(500 * time.Millisecond):
	}
	othersTry(t, ctx, other.Lock(name), h2, "another owner while runtime 2 holds")
	require.NoError(t, h2.Err())
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "runtime 2's hold is left in Redis")
	_ = h2.Unlock(ctx)
}

// RT29-1 for an inner re-entry's Unlock. X holds twice
// (1.5 s LeaseTimes); the inner Unlock is held back 2.5 s. X's hold
// expires; runtime 2 takes X afresh and re-enters (count 2). The late
// release must be refused, leaving runtime 2's count at 2.
func TestRedTeam32LateInnerUnlockSparesAFreshReentry(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	rt2 := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name, owner = "rt32-late-inner-unlock", "owner-rt32-2"
	l1 := rt1.Lock(name, actorlock.WithOwner(owner))
	outer, err := l1.Acquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
	require.NoError(t, err)
	inner, err := l1.TryAcquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
	require.NoError(t, err)
	held := p.on(1, holdCommand, 2500*time.Millisecond, func(c respCommand) bool { return isRelease(c, name, owner, false) })
	unlocked := make(chan error, 1)
	go func() { unlocked <- inner.Unlock(ctx) }()
	await(t, held.hits, 2*time.Second, "the inner Unlock's release, held back")
	freedWithin(t, ctx, direct, name, 3*time.Second, "runtime 1's hold expires")
	l2 := rt2.Lock(name, actorlock.WithOwner(owner))
	a, err := l2.Acquire(ctx, actorlock.LeaseTime(20*time.Second))
	require.NoError(t, err)
	b, err := l2.TryAcquire(ctx, actorlock.LeaseTime(20*time.Second))
	require.NoError(t, err)
	await(t, held.ran, 3*time.Second, "the late release reaches Redis")
	t.Logf("inner Unlock: %v; outer: %v", await(t, unlocked, 3*time.Second, "the Unlock's answer"), outer.Err())
	time.Sleep(700 * time.Millisecond) // give-backs run
	assert.Equal(t, "2", direct.HGet(ctx, name, owner).Val(), "runtime 2's re-entered hold is untouched")
	_ = b.Unlock(ctx)
	_ = a.Unlock(ctx)
}
