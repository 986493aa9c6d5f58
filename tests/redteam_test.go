package tests

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// Red-team reproductions of the exact-safety change (issues 31 and 33).
// Each fails on fc053ad and would pass once its defect is fixed.

// isOpen reports whether a hold's Done is still open.
func isOpen(h *actorlock.Held) bool {
	select {
	case <-h.Done():
		return false
	default:
		return true
	}
}

// R1. A blocking pop (Take) whose first BLMOVE ran but whose reply was lost
// is replayed by go-redis on a new connection; when the replay finds the
// queue empty and times out (nil), runtimeEnv.pop sees "no item, no error"
// and never ends the hold (scripts.Taken is called only when ok or err):
// the item the first BLMOVE moved stays in actorlock_request:{q}:<id>, a
// LIST without expiry, delivered to nobody and never back in the queue.
func TestRedTeamTakeReplayFindingNothingStrandsTheItem(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt-take-stranded"
	q := rt.BlockingQueue(name)
	require.NoError(t, q.Offer(ctx, []byte("only")))
	// The first blocking move's reply is lost (its connection closes after
	// it ran); the replay that go-redis sends is left alone.
	lost := p.on(1, dropReply, 0, func(c respCommand) bool {
		return c.name() == "BLMOVE" && len(c) > 1 && c[1] == name
	})
	tctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	v, err := q.Take(tctx)
	await(t, lost.ran, 5*time.Second, "the first blocking move ran")
	got := takenAndLeft(t, ctx, q, v, err)
	keys, err := direct.Keys(ctx, "actorlock_request:{"+name+"}:*").Result()
	require.NoError(t, err)
	var stranded []string
	for _, k := range keys {
		if direct.Type(ctx, k).Val() == "list" {
			stranded = append(stranded, k+"="+strings.Join(direct.LRange(ctx, k, 0, -1).Val(), ","))
		}
	}
	assert.Equal(t, []string{"only"}, got, "the item reaches the taker or is still in the queue (stranded in holds: %v)", stranded)
}

// R2. A release whose first attempt acted (its reply lost) and whose retry
// meets a Redis error reply (BUSY: another client's script is running) is
// taken for a release that did not run: retryUnknown returns the last
// attempt's redis.Error (triedEarlier keeps the earlier unknown only when
// the last error could not have run), unsettled() calls a redis.Error
// known, releaseFailed runs the release again as a new request, and it
// releases a second hold: the owner's other acquisition, never unlocked,
// loses its hold in Redis while its Done is open, and another runtime
// takes the lock.
func TestRedTeamReleaseRetryMeetingBusyReleasesTwice(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt-busy-release"
	l := rt.Lock(name)
	h1, err := l.Acquire(ctx)
	require.NoError(t, err)
	h2, err := l.Acquire(h1.Context()) // a re-entry: Redis counts 2
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, h1.Owner()).Val())
	require.NoError(t, direct.ConfigSet(ctx, "busy-reply-threshold", "20").Err())

	release := func(c respCommand) bool { return isRelease(c, name, h1.Owner(), false) && !settling(c) }
	lost := p.on(1, dropReply, 0, release)                      // the first attempt acts; its reply is lost
	held := p.on(1, holdCommand, 300*time.Millisecond, release) // the retry reaches Redis while it is busy
	var busyOver atomic.Bool
	late := p.on(1, delayReply, 1500*time.Millisecond, func(c respCommand) bool { return busyOver.Load() && release(c) }) // a second run's reply comes late
	busyDone := make(chan error, 1)
	go func() {
		await(t, lost.ran, 5*time.Second, "the first attempt ran")
		// Another client's script keeps Redis busy for a second.
		err := busyFor(t, direct, time.Second)
		busyOver.Store(true)
		busyDone <- err
	}()
	uerr := h2.Unlock(ctx) // fails (BUSY); the runtime carries it through
	t.Logf("unlock: %v", uerr)
	await(t, held.ran, 5*time.Second, "the retry ran")
	require.NoError(t, await(t, busyDone, 5*time.Second, "the busy script"))
	t.Logf("Redis counts %q once Redis is free again", direct.HGet(ctx, name, h1.Owner()).Val())

	// If the runtime runs the release again, its reply is held back while
	// another runtime tries the lock.
	select {
	case <-late.hits:
	case <-time.After(2 * time.Second):
	}
	oh, err := other.Lock(name).TryAcquire(ctx)
	if err == nil {
		defer func() { _ = oh.Unlock(ctx) }()
	}
	assert.Error(t, err, "another owner took the lock while h1 (never unlocked) holds it; h1 open: %v", isOpen(h1))
	assert.True(t, isOpen(h1), "h1 was never unlocked: %v", h1.Err())
	assert.Equal(t, "1", direct.HGet(ctx, name, h1.Owner()).Val(), "h1's hold is still counted")
}

// R3. Settling a release whose every reply was lost goes on "for as long
// as the guard is sure to live" (giveUpAt = sentAt + TTL - CallTimeout),
// but settleStep.apply checks giveUpAt before a back-off of up to a second
// (runLater), so the last settle can reach Redis after the guard expired.
// It then finds no guard, marks it "not run", and the release, which did
// act, is run again as a new request: it releases the owner's other hold.
// Call timeout 300 ms, watchdog 2.5 s: the guard lives 0.9 + 2.5 = 3.4 s;
// settles fail (their replies lost) until 3.2 s after the first attempt,
// the last one at about 2.7 s, and the next starts about 3.7 s in.
func TestRedTeamSettleAfterTheGuardExpiredReleasesTwice(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t, actorlock.WithCallTimeout(300*time.Millisecond), actorlock.WithWatchdog(2500*time.Millisecond))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt-settle-expired"
	l := rt.Lock(name)
	h1, err := l.Acquire(ctx)
	require.NoError(t, err)
	h2, err := l.Acquire(h1.Context())
	require.NoError(t, err)
	require.Equal(t, "2", direct.HGet(ctx, name, h1.Owner()).Val())

	var sent atomic.Int64          // unix ns of the first attempt
	runs := make(chan string, 100) // the guard of every release attempt that is not a settle
	p.on(100, delayReply, 0, func(c respCommand) bool {
		if isRelease(c, name, h1.Owner(), false) && !settling(c) {
			keys, _, _ := c.script()
			runs <- keys[len(keys)-1]
		}
		return false
	})
	attempts := p.on(4, dropReply, 0, func(c respCommand) bool {
		if isRelease(c, name, h1.Owner(), false) && !settling(c) {
			sent.CompareAndSwap(0, time.Now().UnixNano())
			return true
		}
		return false
	})
	var settles atomic.Int32
	lostSettles := p.on(100, dropReply, 0, func(c respCommand) bool {
		if !isRelease(c, name, h1.Owner(), false) || !settling(c) {
			return false
		}
		settles.Add(1)
		return time.Since(time.Unix(0, sent.Load())) < 3200*time.Millisecond
	})
	_ = h2.Unlock(ctx)
	await(t, attempts.ran, 5*time.Second, "the first attempt ran")
	require.Equal(t, "1", direct.HGet(ctx, name, h1.Owner()).Val(), "the first attempt released the inner hold")
	time.Sleep(5 * time.Second)
	p.stop(lostSettles)
	t.Logf("%d settles, %d of them lost", settles.Load(), len(lostSettles.hits))
	guards := map[string]bool{}
	for len(runs) > 0 {
		guards[<-runs] = true
	}
	t.Logf("h1: open %v, err %v; Redis counts %q", isOpen(h1), h1.Err(), direct.HGet(ctx, name, h1.Owner()).Val())
	assert.Len(t, guards, 1, "the release acted once; no second request may be sent for it: %v", guards)
	assert.True(t, isOpen(h1) || !strings.Contains(h1.Err().Error(), "released by another"), "h1 was never unlocked: %v", h1.Err())
}

// busyFor keeps Redis busy running a script for d (another client's), so
// that commands arriving meanwhile are answered BUSY.
func busyFor(t *testing.T, direct *redis.Client, d time.Duration) error {
	t.Helper()
	return direct.Eval(context.Background(), `local t = redis.call('time')
local s = tonumber(t[1]) * 1000000 + tonumber(t[2])
while true do
  t = redis.call('time')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) - s > tonumber(ARGV[1]) then return 1 end
end`, nil, d.Microseconds()).Err()
}

// R2b. The same shape loses a semaphore permit for good: a plain
// acquisition's first attempt takes the permit (its reply lost), the retry
// is answered BUSY, and acquirePermits settles only an unsettled() error:
// a redis.Error is not one, so the run is taken as not having acquired,
// nothing gives the permit back, and the count stays one short.
func TestRedTeamSemaphoreRetryMeetingBusyLosesAPermit(t *testing.T) {
	t.Parallel()
	p, direct, rt := proxied(t)
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt-busy-sem"
	require.NoError(t, direct.Set(ctx, name, 1, 0).Err())
	ok, err := rt.Semaphore(name).TryAcquire(ctx, 1) // loads the script
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, rt.Semaphore(name).Release(ctx, 1))
	require.NoError(t, direct.ConfigSet(ctx, "busy-reply-threshold", "20").Err())
	acquire := func(c respCommand) bool {
		keys, argv, ok := c.script()
		return ok && len(keys) == 3 && keys[0] == name && guarded(keys) && len(argv) == 4 && argv[0] == "1" && argv[3] != "1"
	}
	lost := p.on(1, dropReply, 0, acquire)
	held := p.on(1, holdCommand, 300*time.Millisecond, acquire)
	busyDone := make(chan error, 1)
	go func() {
		await(t, lost.ran, 5*time.Second, "the first attempt ran")
		busyDone <- busyFor(t, direct, time.Second)
	}()
	ok, err = rt.Semaphore(name).TryAcquire(ctx, 1)
	t.Logf("TryAcquire: %v, %v", ok, err)
	await(t, held.ran, 5*time.Second, "the retry ran")
	require.NoError(t, await(t, busyDone, 5*time.Second, "the busy script"))
	t.Logf("pool after the busy script: %s", direct.Get(ctx, name).Val())
	held1 := int64(0)
	if ok && err == nil {
		held1 = 1
	}
	assert.Eventually(t, func() bool {
		n, _ := direct.Get(ctx, name).Int64()
		return n+held1 == 1
	}, 3*time.Second, 20*time.Millisecond, "the permit is held by the caller or back in the pool (pool: %s)", direct.Get(ctx, name).Val())
}

// R4. The server clock is unknown until a runtime's first guarded reply
// (Clock.notAfter returns ""), and then an attempt carries no deadline:
// Redis lets it act however late it arrives, while its guard lives only
// GuardTTL. A fresh runtime whose first call is a semaphore Release(1):
// its first attempt is held back on its connection past the guard's life
// (3 call timeouts), the retry releases and records, the guard expires,
// and the first attempt releases again: two permits for one Release.
func TestRedTeamFirstCallOfARuntimeHasNoDeadline(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	p := startRESPProxy(t, srv.Addr)
	direct := client(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	const callTimeout = time.Second
	rt := newRuntime(t, rdb, actorlock.WithCallTimeout(callTimeout))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rt-first-call"
	require.NoError(t, direct.Set(ctx, name, 0, 0).Err())
	held := p.on(1, holdCommand, 3*callTimeout+time.Second, func(c respCommand) bool {
		keys, _, ok := c.script()
		return ok && len(keys) > 0 && keys[0] == name && guarded(keys)
	})
	require.NoError(t, rt.Semaphore(name).Release(ctx, 1), "the retry released")
	await(t, held.ran, 10*time.Second, "the first attempt reached Redis")
	assert.Equal(t, "1", direct.Get(ctx, name).Val(), "Release(1) gives one permit")
}
