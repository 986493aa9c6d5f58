package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The thirty-fourth red-team pass, over 6e4b49f..8aa49b0 (RT29-1: every
// release carries its hold's validity as its deadline in Redis; RT32-1,
// RT33-1: a release refused after its acquisition ended answers with that
// end; RT29-2, RT30-1: a newer give-back's token goes to a WithOwner id's
// older give-backs only if its grant ran before their holds' validity, by
// the server clock's estimate; RT31-1: the estimate takes each reading as
// a range).

// RT34-1 (liveness, a documented promise broken): RT30-1's fix hands a
// newer grant's token to a WithOwner id's older give-backs when the token
// (the server's clock at the grant) is before their holds' local validity
// (undoStep.validTo). But the local validity is when Redis may expire the
// hold at the earliest (sentAt + lease - Drift), not when it does: the
// grant ran after it was sent (held back on its way here, and always by
// the one-way trip), and Redis keeps the hold until then + lease. A
// re-entry that runs in that window, after the local validity and before
// Redis expires the hold, re-enters this runtime's own hold (count 2, not
// fresh), yet its token is judged "after the validity" and kept from the
// lost hold's give-back. The re-entry's give-back (count 2, T2) runs
// (count 1); the lost hold's (count 1, T1) meets the counter at T2, is
// refused and dropped: X's count 1 stays in Redis for the re-entry's
// watchdog lease (30 s), ten times the hold's own 3 s, held by nobody,
// and X's next acquisition re-enters it (docs/guarantees.md, "A lost hold is given back":
// "it never re-enters the lost one"). Before b26529f the
// token was handed, and the hold given back.
//
// Here X's outer acquisition (3 s LeaseTime) reaches Redis 1 s late: its
// local validity ends ~2.97 s after it was sent, Redis's at 4 s. The
// re-entry (the watchdog's lease) is sent at ~2.4 s and reaches Redis at
// ~3.5 s.
func TestRedTeam34ReentryAfterTheLocalValidityStrandsTheLostHold(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 60*time.Second)
	const name, owner = "rt34-reentry-after-local-validity", "owner-rt34-1"
	l1 := rt1.Lock(name, actorlock.WithOwner(owner))
	acquire := func(c respCommand) bool { return isGuardedAcquire(c, name, owner) && !settling(c) }
	slow := p.on(1, holdCommand, time.Second, acquire)
	sent := time.Now()
	outer, err := l1.Acquire(ctx, actorlock.LeaseTime(3*time.Second))
	require.NoError(t, err)
	require.NotEmpty(t, slow.hits, "the outer acquisition was held back")
	t.Logf("outer granted %v after it was sent; valid until +%v", time.Since(sent).Round(time.Millisecond), outer.ValidUntil().Sub(sent).Round(time.Millisecond))
	time.Sleep(time.Until(sent.Add(2400 * time.Millisecond)))
	late := p.on(1, holdCommand, 1100*time.Millisecond, acquire)
	undos := p.on(10, delayReply, 0, func(c respCommand) bool { return isRelease(c, name, owner, true) })
	reentered := make(chan gotHold, 1)
	go func() {
		h, err := l1.TryAcquire(ctx) // the watchdog's lease
		reentered <- gotHold{h, err}
	}()
	await(t, late.hits, 2*time.Second, "the re-entry, on its way (held back)")
	select {
	case <-outer.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the outer hold's Done stays open past its validity")
	}
	await(t, late.ran, 3*time.Second, "the re-entry reaches Redis")
	t.Logf("the re-entry ran at +%v: Redis %v (PTTL %v)", time.Since(sent).Round(time.Millisecond), direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	got := await(t, reentered, 3*time.Second, "the re-entry's answer")
	t.Logf("the re-entry: %v", got.err)
	if got.err == nil {
		require.NoError(t, got.h.Unlock(ctx))
	}
	time.Sleep(500 * time.Millisecond) // the give-backs run
	for len(undos.ran) > 0 {
		_, argv, _ := (<-undos.ran).script()
		t.Logf("give-back run: holds %s, expecting count %s and token %s (outer's token %d)", argv[1], argv[3], argv[4], outer.Token())
	}
	// The outer hold's 3 s lease ended in Redis at +4 s; the re-entry was
	// given back: nothing of X is left.
	lostHoldIsGivenBack(t, ctx, direct, other, l1, name, owner)
}
