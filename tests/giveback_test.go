package tests

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// givebackLease is the watchdog lease of these tests: Redis is stalled for
// longer than it, and for less than go-redis's 3 s read timeout, so that
// replies arrive late rather than never.
const givebackLease = 2 * time.Second

// stall freezes Redis for d: CLIENT PAUSE WRITE (scripts wait, reads go on)
// or DEBUG SLEEP (everything waits). It returns when the stall has begun,
// and a channel closed when it is over.
type stall func(t *testing.T, ctx context.Context, admin *redis.Client, d time.Duration) <-chan struct{}

func clientPauseWrite(t *testing.T, ctx context.Context, admin *redis.Client, d time.Duration) <-chan struct{} {
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", strconv.FormatInt(d.Milliseconds(), 10), "WRITE").Err())
	over := make(chan struct{})
	time.AfterFunc(d, func() { close(over) })
	return over
}

func debugSleep(t *testing.T, ctx context.Context, admin *redis.Client, d time.Duration) <-chan struct{} {
	over := make(chan struct{})
	started := time.Now()
	go func() {
		defer close(over)
		assert.NoError(t, admin.Do(ctx, "DEBUG", "SLEEP", strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Err())
	}()
	// The sleep has begun once a PING stops being answered at once.
	probe := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	for time.Since(started) < d/2 && probe.Ping(ctx).Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	return over
}

// stallSetup starts a server that takes DEBUG commands, a runtime with
// the tests' lease on it, and an admin client to stall it with.
func stallSetup(t *testing.T) (rdb, admin *redis.Client, rt *actorlock.Runtime, ctx context.Context) {
	srv := startRedis(t, "--enable-debug-command", "local")
	rdb, admin = client(t, srv.Addr), client(t, srv.Addr)
	return rdb, admin, newRuntime(t, rdb, actorlock.WithWatchdog(givebackLease)), ctxFor(t, 30*time.Second)
}

var stalls = []struct {
	name  string
	stall stall
}{
	{"CLIENT PAUSE WRITE", clientPauseWrite},
	{"DEBUG SLEEP", debugSleep},
}

// An acquisition sent just as Redis stalls for longer than the lease gets
// its grant back too late to use: the caller is never handed a Held that is
// born lost. The grant is given back (nothing of it is left in Redis), and
// an Acquire with wait time left goes on waiting and gets a fresh hold
// (count 1), while a TryAcquire fails with ErrNotAcquired.
func TestGrantArrivingAfterItsLeaseIsGivenBack(t *testing.T) {
	t.Parallel()
	for _, s := range stalls {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			rdb, admin, rt, ctx := stallSetup(t)
			waiting := rt.Lock("late-wait", actorlock.WithOwner(rt.ID()+":waiting"))
			trying := rt.Lock("late-try")

			over := s.stall(t, ctx, admin, givebackLease+600*time.Millisecond)
			var wg sync.WaitGroup
			var held *actorlock.Held
			var waitErr, tryErr error
			var took time.Duration
			sent := time.Now()
			wg.Go(func() {
				held, waitErr = waiting.Acquire(ctx, actorlock.WaitTime(15*time.Second))
				took = time.Since(sent)
			})
			wg.Go(func() { _, tryErr = trying.TryAcquire(ctx) })
			wg.Wait()
			<-over

			assert.ErrorIs(t, tryErr, actorlock.ErrNotAcquired, "a late grant is not handed to a TryAcquire")
			require.Eventually(t, func() bool { return rdb.Exists(ctx, "late-try").Val() == 0 },
				time.Second, 10*time.Millisecond, "the late grant was given back")

			require.NoError(t, waitErr, "an Acquire with wait time left goes on waiting")
			assert.Greater(t, took, givebackLease, "it was granted only after the stall, a lease after it was sent")
			select {
			case <-held.Done():
				t.Fatalf("handed a lost hold: %v", held.Err())
			default:
			}
			assert.Equal(t, map[string]string{held.Owner(): "1"}, ownersOf(rdb.HGetAll(ctx, "late-wait").Val()),
				"a fresh hold: the late grant was not re-entered")
			pttl := rdb.PTTL(ctx, "late-wait").Val()
			assert.Greater(t, pttl, givebackLease/2, "the new hold has its lease")
			require.NoError(t, held.Unlock(ctx))
			assert.Zero(t, rdb.Exists(ctx, "late-wait").Val(), "free after its only Unlock")
		})
	}
}

// A hold whose renewal Redis does not confirm within the lease is declared
// lost locally (Done closes before Redis can let anyone else in). The
// renewal still in flight lands once Redis answers again and would keep an
// orphan nobody renews for a whole lease; the runtime gives the hold back
// instead, at once. The same owner's next acquisition, sent while Redis is
// stalled, never re-enters the orphan: it gets a fresh hold.
func TestHoldLostLocallyIsGivenBack(t *testing.T) {
	t.Parallel()
	for _, s := range stalls {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			rdb, admin, rt, ctx := stallSetup(t)
			l := rt.Lock("orphan", actorlock.WithOwner(rt.ID()+":me"))
			h, err := l.Acquire(ctx)
			require.NoError(t, err)
			acquired := time.Now()

			stalledFor := givebackLease + time.Second
			over := s.stall(t, ctx, admin, stalledFor)
			select {
			case <-h.Done():
			case <-time.After(givebackLease + 500*time.Millisecond):
				t.Fatal("Done did not close within the lease of the last confirmed renewal")
			}
			assert.ErrorIs(t, h.Err(), actorlock.ErrLost)
			assert.Less(t, time.Since(acquired), givebackLease+200*time.Millisecond, "Done closed by the lease (+ scheduling)")

			again := make(chan *actorlock.Held, 1)
			go func() {
				h2, err := l.Acquire(ctx, actorlock.WaitTime(15*time.Second))
				assert.NoError(t, err)
				again <- h2
			}()
			<-over
			resumed := time.Now()
			h2 := <-again
			require.NotNil(t, h2)
			assert.Less(t, time.Since(resumed), time.Second,
				"the orphan was given back at once, not left for its lease")
			assert.Equal(t, map[string]string{h2.Owner(): "1"}, ownersOf(rdb.HGetAll(ctx, "orphan").Val()),
				"the same owner's new hold starts at count 1")
			require.NoError(t, h2.Unlock(ctx))
			assert.Zero(t, rdb.Exists(ctx, "orphan").Val(), "nothing left after the Unlock")
		})
	}
}

// Without a new acquisition, the lost hold's key is gone as soon as Redis
// answers again, not a lease later.
func TestLostHoldLeavesNothingInRedis(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	rt := newRuntime(t, rdb, actorlock.WithWatchdog(givebackLease))
	ctx := ctxFor(t, 30*time.Second)
	h, err := rt.Lock("orphan-alone").Acquire(ctx)
	require.NoError(t, err)
	over := clientPauseWrite(t, ctx, client(t, srv.Addr), givebackLease+time.Second)
	<-h.Done()
	require.ErrorIs(t, h.Err(), actorlock.ErrLost)
	<-over
	resumed := time.Now()
	require.Eventually(t, func() bool { return rdb.Exists(ctx, "orphan-alone").Val() == 0 },
		givebackLease, 10*time.Millisecond, "the lost hold was given back")
	assert.Less(t, time.Since(resumed), time.Second, "at once, not after the orphan's lease")
	assert.ErrorIs(t, h.Unlock(ctx), actorlock.ErrLost)
}

// The orphan a lost hold can leave: Redis runs the watchdog's renewals, but
// their confirmations come back later than the lease (a slow return path),
// so the hold is declared lost locally while Redis keeps extending it. The
// runtime gives it back at once instead of leaving it, held by nobody, for
// the rest of the last renewal's lease; the same owner's next acquisition
// waits for that and starts a fresh hold.
func TestRenewedButUnconfirmedHoldIsGivenBack(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	admin := client(t, srv.Addr)
	proxy := startCutProxy(t, srv.Addr)
	rt := newRuntime(t, client(t, proxy.Addr()), actorlock.WithWatchdog(givebackLease))
	ctx := ctxFor(t, 30*time.Second)
	l := rt.Lock("unconfirmed", actorlock.WithOwner(rt.ID()+":me"))
	h, err := l.Acquire(ctx)
	require.NoError(t, err)

	proxy.DelayReplies(givebackLease + 500*time.Millisecond)
	select {
	case <-h.Done():
	case <-time.After(2 * givebackLease):
		t.Fatal("Done did not close although no renewal was confirmed for a lease")
	}
	lost := time.Now()
	require.ErrorIs(t, h.Err(), actorlock.ErrLost)
	again := make(chan *actorlock.Held, 1)
	go func() {
		h2, err := l.Acquire(ctx, actorlock.WaitTime(20*time.Second))
		assert.NoError(t, err)
		again <- h2
	}()
	// Renewals still ran in Redis: without the give-back the key would live
	// on for up to a lease after the last of them.
	require.Eventually(t, func() bool { return admin.Exists(ctx, "unconfirmed").Val() == 0 },
		givebackLease, 5*time.Millisecond, "the lost hold was given back")
	gone := time.Since(lost)
	t.Logf("lost hold gone from Redis %v after Done", gone)
	assert.Less(t, gone, 400*time.Millisecond, "at once, not at the end of the last renewal's lease")

	proxy.DelayReplies(0)
	h2 := <-again
	require.NotNil(t, h2)
	assert.Equal(t, map[string]string{h2.Owner(): "1"}, ownersOf(admin.HGetAll(ctx, "unconfirmed").Val()),
		"the same owner's next hold starts at count 1")
	require.NoError(t, h2.Unlock(ctx))
	assert.Zero(t, admin.Exists(ctx, "unconfirmed").Val())
}

// An Unlock stuck behind a cut network does not keep its hold's Done open:
// the hold was held until its validity ran out, and Done closes then, as
// for any other hold, not when (or if) the release gets through.
func TestDoneClosesOnTimeWhileUnlockIsStuck(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	proxy := startCutProxy(t, srv.Addr)
	rt := newRuntime(t, client(t, proxy.Addr()), actorlock.WithWatchdog(givebackLease))
	ctx := ctxFor(t, 30*time.Second)
	h, err := rt.Lock("stuck-unlock").Acquire(ctx)
	require.NoError(t, err)
	proxy.Cut()
	cut := time.Now()
	unlocked := make(chan error, 1)
	go func() {
		uctx, cancel := context.WithTimeout(ctx, 3*givebackLease)
		defer cancel()
		unlocked <- h.Unlock(uctx)
	}()
	select {
	case <-h.Done():
	case err := <-unlocked:
		t.Fatalf("Unlock returned (%v) before Done closed", err)
	case <-time.After(givebackLease + time.Second):
		t.Fatal("Done did not close while the Unlock was stuck")
	}
	took := time.Since(cut)
	t.Logf("Done closed %v after the cut, the Unlock still stuck", took)
	assert.ErrorIs(t, h.Err(), actorlock.ErrLost)
	assert.Less(t, took, givebackLease+200*time.Millisecond, "within the lease of the last confirmed renewal")
	assert.Error(t, <-unlocked, "the release never got through")
}
