package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The thirty-first red-team pass, over 6e4b49f..27832d1 (RT29-1: every
// release carries its hold's validity as its deadline in Redis; RT29-2 and
// RT30-1: a newer give-back's token goes to a WithOwner id's older
// give-backs only if its grant's token, the server's clock at the grant,
// is before their holds' validity by the runtime's estimate of the server
// clock).

// RT31-1 (a documented promise broken; liveness): RT30-1's fix decides
// whether a late re-entry ran while the lost hold was in Redis by comparing
// its token (the server's clock when it ran) with the hold's validity in
// the runtime's estimate of the server clock (Clock.IssuedBefore). But the
// late reply itself carries the server's clock as read when the script
// ran: arriving d late, it is a reading d too low, and Clock.Observe takes
// a lower reading once the estimate is older than 5 s. A LeaseTime hold
// (no renewals) taken 5 s before is exactly that. The estimate falls by d
// before the grant is given back, and a re-entry that ran less than d
// before the lost hold's validity is judged to have run after it: its
// token is not handed, and RT30-1 comes back. X holds with a 6 s LeaseTime;
// 5.2 s later it re-enters (the watchdog), which runs at once in Redis
// (count 2, PX 30 s) but answers 1.5 s late. The outer hold is lost at its
// validity, its give-back (count 1, T1) queued; the re-entry's grant is
// given back (count 2, T2) without handing T2 on; it runs (count 1), the
// older one is refused by token and dropped. X's count 1 stays in Redis
// for the watchdog's 30 s, held by nobody, and X's next acquisition
// re-enters it (docs/guarantees.md, "A lost hold is given back").
func TestRedTeam31DelayedReplyLowersTheClockAndStrandsALostHold(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 60*time.Second)
	const name, owner = "rt31-stale-clock-strands", "owner-rt31-1"
	l1 := rt1.Lock(name, actorlock.WithOwner(owner))
	outer, err := l1.Acquire(ctx, actorlock.LeaseTime(6*time.Second))
	require.NoError(t, err)
	// No guarded reply for 5.2 s: the clock estimate is over 5 s old.
	time.Sleep(5200 * time.Millisecond)
	late := p.on(1, delayReply, 1500*time.Millisecond, func(c respCommand) bool { return isGuardedAcquire(c, name, owner) && !settling(c) })
	reentryOutlivesItsOuterHold(t, ctx, l1, outer, late)
	time.Sleep(500 * time.Millisecond) // the give-backs run
	lostHoldIsGivenBack(t, ctx, direct, other, l1, name, owner)
}
