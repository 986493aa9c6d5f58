package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// Fencing tokens must rise whatever happens to the counter
// redisson_lock_token:{name}: lost, expired, rolled back by a restart from
// older files or a failover to a lagging replica, or re-created at 1 by
// Redisson's RFencedLock. Each test below makes the counter really older
// than tokens already handed out (and checks that it is), then takes every
// kind of lock of the name again.

func tokenKey(name string) string { return "redisson_lock_token:{" + name + "}" }

// fencingLocks are the lock kinds of one name; each issues its tokens from
// its own script.
func fencingLocks(rt *actorlock.Runtime, name string) []*actorlock.Lock {
	rw := rt.ReadWriteLock(name)
	return []*actorlock.Lock{rt.Lock(name), rt.FairLock(name), rw.ReadLocker(), rw.WriteLocker()}
}

// tokenTrail checks that each token seen is above every one seen before.
// Callers report a token while they still hold the lock exclusively, so the
// order of reports is the order the tokens were issued in.
type tokenTrail struct {
	mu   sync.Mutex
	last int64
	seen int
}

func (tr *tokenTrail) see(t *testing.T, what string, token int64) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	assert.Greater(t, token, tr.last, "%s: token %d after %d (token #%d)", what, token, tr.last, tr.seen+1)
	tr.last = max(tr.last, token)
	tr.seen++
}

func (tr *tokenTrail) highest() int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.last
}

// acquireEach takes each lock n times in turn, re-entering every hold once
// (a re-entry gets a token of its own).
func acquireEach(t *testing.T, ctx context.Context, tr *tokenTrail, locks []*actorlock.Lock, n int) {
	t.Helper()
	for i := range n {
		for _, l := range locks {
			h, err := l.Acquire(ctx, actorlock.WaitTime(5*time.Second))
			require.NoError(t, err, "acquisition %d of %v", i, l.Name())
			tr.see(t, "acquisition", h.Token())
			again, err := l.Acquire(h.Context(), actorlock.WaitTime(5*time.Second))
			require.NoError(t, err)
			tr.see(t, "re-entry", again.Token())
			require.NoError(t, again.Unlock(ctx))
			require.NoError(t, h.Unlock(ctx))
		}
	}
}

// exclusiveKinds makes handles, each a new owner, on the kinds of name that
// exclude each other's owners.
func exclusiveKinds(rt *actorlock.Runtime, name string) []func() *actorlock.Lock {
	return []func() *actorlock.Lock{
		func() *actorlock.Lock { return rt.Lock(name) },
		func() *actorlock.Lock { return rt.FairLock(name) },
		func() *actorlock.Lock { return rt.ReadWriteLock(name).WriteLocker() },
	}
}

// contend has several owners take each exclusive kind at once, so that
// releases hand the lock to local waiters (the hand-off scripts issue tokens
// too). One kind at a time: kinds of one name exclude each other only when
// used one after the other, as in Redisson.
func contend(t *testing.T, ctx context.Context, tr *tokenTrail, kinds []func() *actorlock.Lock) {
	t.Helper()
	for _, kind := range kinds {
		var wg sync.WaitGroup
		for range 3 {
			l := kind()
			wg.Go(func() {
				for range 4 {
					h, err := l.Acquire(ctx, actorlock.WaitTime(10*time.Second))
					if !assert.NoError(t, err) {
						return
					}
					tr.see(t, "contended", h.Token())
					assert.NoError(t, h.Unlock(ctx))
				}
			})
		}
		wg.Wait()
	}
}

// acquireAfterFault takes l once Redis answers again (connections break in a
// restart) and checks its token.
func acquireAfterFault(t *testing.T, ctx context.Context, tr *tokenTrail, l *actorlock.Lock) {
	t.Helper()
	var h *actorlock.Held
	require.Eventually(t, func() bool {
		var err error
		h, err = l.Acquire(ctx, actorlock.WaitTime(time.Second))
		return err == nil
	}, 15*time.Second, 50*time.Millisecond, "acquire after the fault")
	tr.see(t, "first acquisition after the fault", h.Token())
	require.NoError(t, h.Unlock(ctx))
}

func counter(t *testing.T, ctx context.Context, rdb redis.Cmdable, name string) int64 {
	t.Helper()
	n, err := rdb.Get(ctx, tokenKey(name)).Int64()
	require.NoError(t, err, "the fencing counter is there")
	return n
}

// A restart from an RDB snapshot older than the last acquisitions (a crash
// between snapshots, a restore from a backup) brings the counter back to
// an old value: tokens keep rising anyway.
func TestFencingTokensRiseAfterRestartFromOlderSnapshot(t *testing.T) {
	t.Parallel()
	srv, rdb, rt := setup(t)
	ctx := ctxFor(t, 60*time.Second)
	const name = "snapshot"
	locks := fencingLocks(rt, name)
	var tr tokenTrail

	acquireEach(t, ctx, &tr, locks, 2)
	contend(t, ctx, &tr, exclusiveKinds(rt, name))
	require.NoError(t, rdb.Save(ctx).Err())
	saved := counter(t, ctx, rdb, name)
	acquireEach(t, ctx, &tr, locks, 2)
	contend(t, ctx, &tr, exclusiveKinds(rt, name))
	require.Greater(t, tr.highest(), saved)

	require.NoError(t, srv.Kill())
	require.NoError(t, srv.Restart())
	require.Equal(t, saved, counter(t, ctx, rdb, name), "the counter is back to its snapshot value, below tokens already issued")

	for _, l := range locks {
		acquireAfterFault(t, ctx, &tr, l)
	}
	contend(t, ctx, &tr, exclusiveKinds(rt, name))
	t.Logf("%d tokens, counter rolled back from %d to %d, tokens still rose", tr.seen, tr.highest(), saved)
}

// appendfsync everysec loses up to a second of writes in a crash. Emulated
// by restarting from a copy of the AOF taken before the last acquisitions:
// the counter on disk is older than tokens already issued.
func TestFencingTokensRiseAfterAOFLoss(t *testing.T) {
	t.Parallel()
	srv := startRedis(t, "--appendonly", "yes", "--appendfsync", "everysec")
	rdb := client(t, srv.Addr)
	rt := newRuntime(t, rdb)
	ctx := ctxFor(t, 60*time.Second)
	const name = "aof"
	locks := fencingLocks(rt, name)
	var tr tokenTrail

	acquireEach(t, ctx, &tr, locks, 2)
	// The acquisitions so far are in the AOF file once Redis's AOF buffer
	// is empty: the copy is what a crash a second later would leave.
	require.Eventually(t, func() bool {
		info, err := rdb.Info(ctx, "persistence").Result()
		return err == nil && strings.Contains(info, "aof_buffer_length:0")
	}, 5*time.Second, 10*time.Millisecond)
	onDisk := counter(t, ctx, rdb, name)
	aof := filepath.Join(srv.Dir(), "appendonlydir")
	old := t.TempDir()
	copyFiles(t, aof, old)

	acquireEach(t, ctx, &tr, locks, 2)
	contend(t, ctx, &tr, exclusiveKinds(rt, name))
	require.Greater(t, tr.highest(), onDisk)

	require.NoError(t, srv.Kill())
	require.NoError(t, os.RemoveAll(aof))
	copyFiles(t, old, aof)
	require.NoError(t, srv.Restart())
	require.Equal(t, onDisk, counter(t, ctx, rdb, name), "the counter is back to what the older AOF held")

	for _, l := range locks {
		acquireAfterFault(t, ctx, &tr, l)
	}
	t.Logf("%d tokens, counter rolled back from %d to %d, tokens still rose", tr.seen, tr.highest(), onDisk)
}

// A failover to a replica that lagged behind the master's last acquisitions:
// the promoted replica's counter is older than tokens already issued.
func TestFencingTokensRiseAfterFailoverToLaggingReplica(t *testing.T) {
	t.Parallel()
	master, replica := replicaPair(t)
	mc, rc := client(t, master.Addr), client(t, replica.Addr)
	ctx := ctxFor(t, 60*time.Second)
	const name = "failover"
	var tr tokenTrail

	rt := newRuntime(t, mc)
	locks := fencingLocks(rt, name)
	acquireEach(t, ctx, &tr, locks, 2)
	acked, err := mc.Wait(ctx, 1, 5000).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, acked, "the replica has the first acquisitions")
	replicated := counter(t, ctx, rc, name)
	require.Equal(t, tr.highest(), replicated)

	// The replica stops receiving (it now tries to reach a port nobody
	// listens on), as a lagging replica would.
	require.NoError(t, rc.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err())
	acquireEach(t, ctx, &tr, locks, 2)
	contend(t, ctx, &tr, exclusiveKinds(rt, name))
	require.Equal(t, replicated, counter(t, ctx, rc, name), "the replica missed the last acquisitions")
	require.Greater(t, tr.highest(), replicated)

	require.NoError(t, master.Kill())
	require.NoError(t, rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
	promoted := newRuntime(t, rc)
	for _, l := range fencingLocks(promoted, name) {
		acquireAfterFault(t, ctx, &tr, l)
	}
	contend(t, ctx, &tr, exclusiveKinds(promoted, name))
	t.Logf("%d tokens, promoted replica's counter %d was below the last token issued on the old master", tr.seen, replicated)
}

// The counter deleted, expired, re-created at 1 by Redisson's RFencedLock or
// set back by hand: tokens keep rising. With WithFencingCounterTTL(0) the
// counter never expires, as Redisson's does not.
func TestFencingTokensRiseWhenTheCounterIsLost(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t, actorlock.WithFencingCounterTTL(0))
	ctx := ctxFor(t, 60*time.Second)
	const name = "lost"
	locks := fencingLocks(rt, name)
	var tr tokenTrail
	key := tokenKey(name)

	acquireEach(t, ctx, &tr, locks, 1)
	assert.Equal(t, time.Duration(-1), rdb.PTTL(ctx, key).Val(), "no expiry with a TTL of 0")
	first := tr.highest()

	require.NoError(t, rdb.Del(ctx, key).Err())
	acquireEach(t, ctx, &tr, locks, 1)

	require.NoError(t, rdb.PExpire(ctx, key, time.Millisecond).Err())
	require.Eventually(t, func() bool { return rdb.Exists(ctx, key).Val() == 0 }, 5*time.Second, 10*time.Millisecond)
	acquireEach(t, ctx, &tr, locks, 1)

	// RFencedLock after the counter is gone: INCR creates it at 1.
	require.NoError(t, rdb.Del(ctx, key).Err())
	require.EqualValues(t, 1, rdb.Incr(ctx, key).Val())
	acquireEach(t, ctx, &tr, locks, 1)

	// Set back by hand (a restore of that one key).
	require.NoError(t, rdb.Set(ctx, key, first, 0).Err())
	acquireEach(t, ctx, &tr, locks, 1)
	contend(t, ctx, &tr, exclusiveKinds(rt, name))

	// A counter that is not a number is replaced, not a reason to refuse
	// every acquisition of the name.
	require.NoError(t, rdb.Set(ctx, key, "garbage", 0).Err())
	acquireEach(t, ctx, &tr, locks, 1)
	assert.Equal(t, tr.highest(), counter(t, ctx, rdb, name), "the counter holds the last token issued")
}

// WithFencingCounterTTL: the counter expires that long after the name's
// last acquisition (the call timeout and the acquisition's lease at least),
// and tokens keep rising past its expiry.
func TestFencingCounterTTL(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	_, rdb, rt := setup(t, actorlock.WithFencingCounterTTL(ttl), actorlock.WithCallTimeout(ttl), actorlock.WithWatchdog(ttl))
	ctx := ctxFor(t, 60*time.Second)
	const name = "expiring"
	locks := fencingLocks(rt, name)
	var tr tokenTrail
	key := tokenKey(name)

	acquireEach(t, ctx, &tr, locks[:1], 1)
	left := rdb.PTTL(ctx, key).Val()
	assert.True(t, left > ttl/2 && left <= ttl, "counter TTL %v after an acquisition", left)
	time.Sleep(ttl / 2)
	acquireEach(t, ctx, &tr, locks[1:], 1)
	left = rdb.PTTL(ctx, key).Val()
	// Each acquisition restarts it, and it lives as long as the lock did:
	// the write lock's re-entry adds its lease to what was left (two).
	assert.True(t, left > 3*ttl/4 && left <= 2*ttl, "counter TTL %v: each acquisition restarts it", left)

	require.Eventually(t, func() bool { return rdb.Exists(ctx, key).Val() == 0 }, 3*ttl, 20*time.Millisecond,
		"the counter expires after the last acquisition")
	acquireEach(t, ctx, &tr, locks, 1)
}

// redissonFencedAcquire takes the lock as Redisson's RFencedLock does: the
// same hash as our reentrant lock, and INCR of the same counter for its
// token. Returns the token, or -1 if the lock is held by someone else.
var redissonFencedAcquire = redis.NewScriptServerSHA(`
if redis.call('exists', KEYS[1]) == 1 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return -1
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return redis.call('incr', KEYS[2])
`)

// Go and Java sharing a fenced lock: with the counter kept
// (WithFencingCounterTTL(0)), RFencedLock's INCR continues from our tokens,
// so its tokens and ours interleave in one rising sequence. With an expiring counter, RFencedLock
// restarts at 1 after the expiry: its tokens fall below ours (ours still
// rise), so a resource fenced by both refuses its writes. That is why the
// counter can be kept.
func TestFencingTokensMixedWithRedissonFencedLock(t *testing.T) {
	t.Parallel()
	srv, rdb, rt := setup(t, actorlock.WithFencingCounterTTL(0))
	ctx := ctxFor(t, 60*time.Second)
	const name = "mixed"
	const javaOwner = "6f1c9a3e-0000-4000-8000-000000000001:1"
	var tr tokenTrail
	l := rt.Lock(name)

	java := func(lock string) int64 {
		t.Helper()
		token, err := redissonFencedAcquire.Run(ctx, rdb, []string{lock, tokenKey(lock)}, 30000, javaOwner).Int64()
		require.NoError(t, err)
		require.Positive(t, token, "RFencedLock got the lock")
		require.NoError(t, rdb.Del(ctx, lock).Err()) // its unlock
		return token
	}
	for range 3 {
		h, err := l.Acquire(ctx)
		require.NoError(t, err)
		tr.see(t, "actorlock", h.Token())
		require.NoError(t, h.Unlock(ctx))
		tr.see(t, "RFencedLock after actorlock", java(name))
		tr.see(t, "RFencedLock again", java(name))
	}

	// The trade-off of an expiring counter, shown: Java starts again at 1.
	expiring := newRuntime(t, client(t, srv.Addr), actorlock.WithFencingCounterTTL(time.Second), actorlock.WithCallTimeout(time.Second),
		actorlock.WithWatchdog(time.Second))
	const short = "mixed-expiring"
	h, err := expiring.Lock(short).Acquire(ctx)
	require.NoError(t, err)
	ours := h.Token()
	require.NoError(t, h.Unlock(ctx))
	require.Eventually(t, func() bool { return rdb.Exists(ctx, tokenKey(short)).Val() == 0 }, 5*time.Second, 20*time.Millisecond)
	assert.EqualValues(t, 1, java(short), "RFencedLock restarts an expired counter at 1, below our tokens")
	h, err = expiring.Lock(short).Acquire(ctx)
	require.NoError(t, err)
	assert.Greater(t, h.Token(), ours, "ours still rise")
	require.NoError(t, h.Unlock(ctx))
}

// copyFiles copies the regular files of directory src into dst.
func copyFiles(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o700))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	require.NotEmpty(t, entries, "files in %s", src)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600))
	}
}
