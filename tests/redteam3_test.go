package tests

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/scripts"
)

// Third red-team pass, over ade4799..20a8dfa (RT2 fixes, primfix). Each
// test fails on 20a8dfa and passes with its fix.

// RT3-1. The RT2 fix makes the fencing counter live as long as the hold
// (options.go, WithFencingCounterTTL: "Nor does the counter expire while a
// hold of ours lives: an acquisition sets no TTL shorter than its lease,
// and the watchdog's renewals extend the counter with the lock, since a
// give-back of a lost hold tells by the counter whether a newer grant of
// its owner id came since"). Held.Extend extends the lock (lock_extend.lua)
// but not the counter, so a LeaseTime hold extended past its first lease
// outlives its counter; when that hold is then lost locally while its last
// extension ran in Redis (extendDone's "g == nil && d.held" give-back, with
// IfToken), the give-back reads a missing counter, answers "count or token
// differs" and is dropped: the orphan keeps the lock from everyone for the
// whole extended lease (docs/guarantees.md, a lost hold is "given back as
// soon as Redis answers"), and the same owner's next Acquire re-enters it
// (count 2) instead of starting a fresh hold (the RT2-2 symptom, through
// Extend instead of watchdog renewals).
// Interleaving: Acquire(LeaseTime 3 s; counter TTL 3 s); Extend(8 s) at
// once; the counter expires at 3 s while the hold lives; at about 7.3 s
// Extend(8 s) again, its reply held 1.5 s: the script runs (lease now to
// 15 s), the local deadline passes, the reply comes, the give-back is
// dropped.
func TestRedTeam3ExtendedHoldOutlivesItsCounterAndIsNotGivenBack(t *testing.T) {
	t.Parallel()
	ttl := 2 * time.Second
	if os.Getenv("RT3_LONG_COUNTER") != "" {
		ttl = time.Minute // control: with the counter alive the give-back acts
	}
	p, admin, rt := proxied(t, actorlock.WithCallTimeout(2*time.Second), actorlock.WithFencingCounterTTL(ttl))
	ctx := ctxFor(t, 40*time.Second)
	const name = "rt3-extend-counter"
	l := rt.Lock(name, actorlock.WithOwner(rt.ID()+":me"))
	h, err := l.Acquire(ctx, actorlock.LeaseTime(3*time.Second))
	require.NoError(t, err)
	first := time.Now()
	require.NoError(t, h.Extend(ctx, 8*time.Second))
	time.Sleep(3500 * time.Millisecond)
	require.NoError(t, h.Err())
	counterGone := admin.Exists(ctx, "redisson_lock_token:{"+name+"}").Val() == 0
	t.Logf("at %v the counter exists: %v (hold valid until %v from now)", time.Since(first).Round(time.Millisecond), !counterGone, time.Until(h.ValidUntil()).Round(time.Millisecond))
	assert.False(t, counterGone, "the fencing counter lives as long as the hold (options.go)")

	time.Sleep(time.Until(h.ValidUntil()) - 700*time.Millisecond)
	late := p.on(1, delayReply, 1500*time.Millisecond, func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && len(keys) == 2 && keys[0] == name && len(argv) == 2 && argv[1] == h.Owner() && argv[0] == "8000"
	})
	err = h.Extend(ctx, 8*time.Second)
	t.Logf("second Extend: %v", err)
	await(t, late.ran, 3*time.Second, "the second extension, run by Redis")
	<-h.Done()
	time.Sleep(1500 * time.Millisecond) // the reply comes; the give-back runs
	t.Logf("after the hold was lost: Redis has %v (PTTL %v)", admin.HGetAll(ctx, name).Val(), admin.PTTL(ctx, name).Val())
	assert.Equal(t, int64(0), admin.Exists(ctx, name).Val(), "the hold lost locally, extended in Redis, is given back as soon as Redis answers")
	h2, err := l.TryAcquire(ctx, actorlock.LeaseTime(5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{h2.Owner(): "1"}, ownersOf(admin.HGetAll(ctx, name).Val()), "the same owner's next hold starts at count 1, never re-entering the lost one")
	_ = h2.Unlock(ctx)
}

// RT3-2. acquireExpirable (actors/semaphore.go) says of Close: "Closing:
// nothing is handed out, the ids go back (mayHold), even if an attempt may
// still take them", and docs/guarantees.md ("Nothing is stranded"): "A
// cancelled Take or Acquire gives back what it won the race for ... and
// one that won it as Close ran returns it rather than ErrClosed". But the
// give-back (undoAcquire -> carryThrough) starts only once Close has
// cancelled callsCtx (that is what ends acquireExpirable's wait), so every
// run of it fails at once and it is dropped: the permit, taken in Redis
// under ids nobody knows, is never released. With no lease (Acquire(ctx,
// 0)) it is lost for good; the pool stays one short for ever.
// Interleaving: one permit; Acquire(ctx, 0)'s first attempt runs and takes
// the permit, its reply is lost (connection closed); the re-attempt finds
// the ids held ({1, ...}), but since an attempt's outcome was unknown the
// actor waits about a call timeout and a half before concluding; Close
// runs meanwhile.
func TestRedTeam3CloseDuringExpirableAcquireLosesThePermit(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	direct := client(t, srv.Addr)
	rt := newRuntime(t, client(t, p.Addr()), actorlock.WithCallTimeout(2*time.Second))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt3-close-expirable"
	sem := rt.PermitExpirableSemaphore(name)
	ok, err := sem.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	id, err := sem.Acquire(ctx, 0) // loads the scripts, learns the clock
	require.NoError(t, err)
	require.NoError(t, sem.Release(ctx, id))
	require.Equal(t, "1", direct.Get(ctx, name).Val())

	lost := p.on(1, dropReply, 0, func(c respCommand) bool {
		keys, _, ok := c.script()
		return ok && len(keys) == 3 && keys[0] == name // the acquire (a release has its guard's keys too)
	})
	res := make(chan error, 1)
	go func() {
		_, err := sem.Acquire(ctx, 0)
		res <- err
	}()
	await(t, lost.ran, 5*time.Second, "the first attempt, run by Redis")
	time.Sleep(300 * time.Millisecond) // the re-attempt finds the ids held; the actor waits
	require.Equal(t, "0", direct.Get(ctx, name).Val(), "the attempt took the permit")
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t.Logf("Close: %v", rt.Close(cctx))
	t.Logf("Acquire: %v", await(t, res, 5*time.Second, "the Acquire's answer"))
	time.Sleep(time.Second)
	t.Logf("after Close: available %q, held ids %d", direct.Get(ctx, name).Val(), direct.ZCard(ctx, scripts.PermitTimeoutKey(name)).Val())
	assert.Equal(t, "1", direct.Get(ctx, name).Val(), "the permit no caller got is back in the pool")
}
