package tests

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The thirty-third red-team pass, over 6e4b49f..6c7b47f (RT29-1: every
// release carries its hold's validity as its deadline in Redis; RT32-1: a
// release refused after its acquisition ended reports that end; RT29-2,
// RT30-1: a newer give-back's token goes to a WithOwner id's older
// give-backs only if its grant ran before their validity; RT31-1: the
// server clock's estimate takes each reading as a range).

// RT33-1 (API): RT32-1 answers a release that did not run after its
// acquisition ended with that end (ErrLost), but only to the callers not
// yet told (!s.told). A release that failed once (BUSY) told its first
// Unlock and is carried through by the actor; an Unlock called again
// joins it (releaseStep.join) to hear its outcome. When its next run is
// held back past the hold's validity, the hold is abandoned at its
// validity (the acquisition ends ErrLost), and the run is settled as not
// run; releaseFailed skips the RT32-1 case (told), and the last branch
// answers the joined Unlock with the script's internal "did not run"
// (scripts.ErrNotRun), neither ErrLost nor any exported sentinel
// (docs/guarantees.md, "Exactly once": "its Unlock reports ErrLost";
// "Unlock called again ... joins it and reports its outcome").
func TestRedTeam33JoinedUnlockOfARetriedReleaseReportsNotRun(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt33-joined-unlock-not-run"
	h, err := rt.Lock(name).Acquire(ctx, actorlock.LeaseTime(3*time.Second))
	require.NoError(t, err)
	var second atomic.Bool
	mine := func(c respCommand) bool { return isRelease(c, name, h.Owner(), false) && !settling(c) }
	// The first run is refused (BUSY) for its whole call timeout.
	refused := p.on(100000, busy, 0, func(c respCommand) bool { return !second.Load() && mine(c) })
	// The runs after it reach Redis 2.5 s late, past the hold's validity.
	held := p.on(100, holdCommand, 2500*time.Millisecond, func(c respCommand) bool { return second.Load() && mine(c) })
	first := h.Unlock(ctx)
	second.Store(true)
	require.Error(t, first, "the first run was refused (BUSY)")
	require.NotEmpty(t, refused.hits, "the first run met the BUSY refusals")
	t.Logf("first Unlock: %v", first)
	// Called again: joins the release the actor carries through.
	unlocked := make(chan error, 1)
	go func() { unlocked <- h.Unlock(ctx) }()
	await(t, held.hits, 2*time.Second, "the release's next run, held back")
	err = await(t, unlocked, 8*time.Second, "the joined Unlock's answer")
	t.Logf("joined Unlock: %v; Held.Err: %v; Redis: %v", err, h.Err(), direct.HGetAll(ctx, name).Val())
	require.Error(t, err, "the release never ran")
	assert.ErrorIs(t, h.Err(), actorlock.ErrLost, "the acquisition ended lost at its validity")
	assert.ErrorIs(t, err, actorlock.ErrLost, "a joined Unlock of a release refused after its acquisition ended reports that end, ErrLost")
	freedWithin(t, ctx, direct, name, 3*time.Second, "the lost hold is given back")
}
