package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/primitive"
)

// redissonPES plays Redisson 4.7's RPermitExpirableSemaphore: the scripts
// below do in Redis what its Java client sends (same keys, argument order
// and values: its own clock as "now", raw 16-byte ids, 922337203685477 as
// the expiry of a permit without lease, PUBLISH to redisson_sc:{name}), so
// that the tests check our side against its behaviour, not against ours.
type redissonPES struct {
	rdb  *redis.Client
	name string
}

// redissonNever is Redisson's expiry of a permit taken without lease.
const redissonNever = "922337203685477"

// Redisson's tryAcquire(permits, lease): KEYS name, {name}:timeout, channel;
// ARGV permits, expiry date, client now, never, publish command, raw ids.
// It reclaims at most as many expired permits as it wants, and answers
// "OK", ":<earliest expiry>" or nil.
var redissonAcquire = redis.NewScriptServerSHA(`
local want = tonumber(ARGV[1])
local stale = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, want)
if #stale > 0 then
  redis.call('zrem', KEYS[2], unpack(stale))
  local back = redis.call('incrby', KEYS[1], #stale)
  if back > 0 then redis.call(ARGV[5], KEYS[3], back) end
end
local free = redis.call('get', KEYS[1])
if free and tonumber(free) >= want then
  redis.call('decrby', KEYS[1], want)
  for i = 6, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[1] ~= nil and first[2] ~= ARGV[4] then return ':' .. first[2] end
return nil`)

// Redisson's tryRelease(id): KEYS name, channel, timeout; ARGV raw id, 1,
// client now, publish command. A permit found goes back even when expired
// (then 0 is answered); the new count is published.
var redissonRelease = redis.NewScriptServerSHA(`
local expiry = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then return 0 end
local count = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], count)
if tonumber(expiry) <= tonumber(ARGV[3]) then return 0 end
return 1`)

// Redisson's tryRelease(ids): KEYS name, channel, timeout; ARGV count,
// client now, publish command, raw ids. All or nothing; it publishes how
// many came back, not the count.
var redissonReleaseAll = redis.NewScriptServerSHA(`
for i = 4, #ARGV do
  local e = redis.call('zscore', KEYS[3], ARGV[i])
  if e == false or tonumber(e) <= tonumber(ARGV[2]) then return 0 end
end
local stale = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1)
if #stale > 0 then
  redis.call('zrem', KEYS[3], unpack(stale))
  local back = redis.call('incrby', KEYS[1], #stale)
  if back > 0 then redis.call(ARGV[3], KEYS[2], back) end
end
local ids = {}
for i = 4, #ARGV do table.insert(ids, ARGV[i]) end
local removed = redis.call('zrem', KEYS[3], unpack(ids))
redis.call('incrby', KEYS[1], removed)
redis.call(ARGV[3], KEYS[2], removed)
return removed`)

// Redisson's updateLeaseTime(id, lease): KEYS name, timeout, channel; ARGV
// raw id, expiry date, client now, publish command.
var redissonUpdateLease = redis.NewScriptServerSHA(`
local stale = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, -1)
if #stale > 0 then
  redis.call('zrem', KEYS[2], unpack(stale))
  local back = redis.call('incrby', KEYS[1], #stale)
  if back > 0 then redis.call(ARGV[4], KEYS[3], back) end
end
if redis.call('zscore', KEYS[2], ARGV[1]) ~= false then
  redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
  return 1
end
return 0`)

// Redisson's availablePermits(): KEYS name, timeout, channel; ARGV client
// now, publish command.
var redissonAvailable = redis.NewScriptServerSHA(`
local stale = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1)
if #stale > 0 then
  redis.call('zrem', KEYS[2], unpack(stale))
  local back = redis.call('incrby', KEYS[1], #stale)
  if back > 0 then redis.call(ARGV[2], KEYS[3], back) end
  return back
end
local free = redis.call('get', KEYS[1])
if free == false then return 0 end
return tonumber(free)`)

func (r redissonPES) timeoutKey() string { return "{" + r.name + "}:timeout" }
func (r redissonPES) channel() string    { return "redisson_sc:{" + r.name + "}" }

func redissonExpiry(lease time.Duration) string {
	if lease < 0 {
		return redissonNever
	}
	return strconv.FormatInt(time.Now().Add(lease).UnixMilli(), 10)
}

// tryAcquire is one attempt: the ids taken, or the earliest expiry it saw
// (0: none, or only permits without lease).
func (r redissonPES) tryAcquire(t *testing.T, ctx context.Context, n int, lease time.Duration) ([]string, int64) {
	t.Helper()
	ids := make([]string, n)
	args := []any{n, redissonExpiry(lease), time.Now().UnixMilli(), redissonNever, "publish"}
	for i := range ids {
		var b [16]byte
		_, _ = rand.Read(b[:])
		ids[i] = hex.EncodeToString(b[:]) // ByteBufUtil.hexDump: lower case
		args = append(args, b[:])
	}
	res, err := redissonAcquire.Run(ctx, r.rdb, []string{r.name, r.timeoutKey(), r.channel()}, args...).Result()
	if err == redis.Nil {
		return nil, 0
	}
	require.NoError(t, err)
	s := res.(string)
	if s == "OK" {
		return ids, 0
	}
	require.True(t, strings.HasPrefix(s, ":"), "reply %q", s)
	nearest, err := strconv.ParseInt(s[1:], 10, 64)
	require.NoError(t, err)
	return nil, nearest
}

// acquire blocks as Redisson's acquire(permits, lease) does: subscribed to
// the channel, it re-attempts on every message and at the earliest expiry.
func (r redissonPES) acquire(t *testing.T, ctx context.Context, n int, lease time.Duration) []string {
	t.Helper()
	sub := r.rdb.Subscribe(ctx, r.channel())
	defer sub.Close()
	_, err := sub.Receive(ctx) // the subscription is confirmed
	require.NoError(t, err)
	for {
		ids, nearest := r.tryAcquire(t, ctx, n, lease)
		if ids != nil {
			return ids
		}
		var wake <-chan time.Time
		if nearest > 0 {
			wake = time.After(time.Until(time.UnixMilli(nearest)))
		}
		select {
		case <-sub.Channel():
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("Redisson's acquire of %d permits of %q never succeeded", n, r.name)
		}
	}
}

func (r redissonPES) release(t *testing.T, ctx context.Context, id string) bool {
	t.Helper()
	res, err := redissonRelease.Run(ctx, r.rdb, []string{r.name, r.channel(), r.timeoutKey()},
		permitMember(t, id), 1, time.Now().UnixMilli(), "publish").Int()
	require.NoError(t, err)
	return res == 1
}

func (r redissonPES) releaseAll(t *testing.T, ctx context.Context, ids []string) int {
	t.Helper()
	args := []any{len(ids), time.Now().UnixMilli(), "publish"}
	for _, id := range ids {
		args = append(args, permitMember(t, id))
	}
	res, err := redissonReleaseAll.Run(ctx, r.rdb, []string{r.name, r.channel(), r.timeoutKey()}, args...).Int()
	require.NoError(t, err)
	return res
}

func (r redissonPES) updateLeaseTime(t *testing.T, ctx context.Context, id string, lease time.Duration) bool {
	t.Helper()
	res, err := redissonUpdateLease.Run(ctx, r.rdb, []string{r.name, r.timeoutKey(), r.channel()},
		permitMember(t, id), redissonExpiry(lease), time.Now().UnixMilli(), "publish").Int()
	require.NoError(t, err)
	return res == 1
}

func (r redissonPES) available(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	res, err := redissonAvailable.Run(ctx, r.rdb, []string{r.name, r.timeoutKey(), r.channel()},
		time.Now().UnixMilli(), "publish").Int64()
	require.NoError(t, err)
	return res
}

// permitMember is a permit id's ZSET member: its 16 raw bytes.
func permitMember(t testing.TB, id string) string {
	t.Helper()
	b, err := hex.DecodeString(id)
	require.NoError(t, err, "permit id %q", id)
	require.Len(t, b, 16, "permit id %q", id)
	return string(b)
}

// What we write is Redisson 4.7's layout byte for byte: the ZSET
// {name}:timeout with each id's 16 raw bytes scored by its expiry in ms,
// nothing under the key earlier versions used, the new count published on
// every release; bad input is refused before anything changes.
func TestPermitLayoutIsRedissons(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	s := rt.PermitExpirableSemaphore("pl")
	ok, err := s.TrySetPermits(ctx, 3)
	require.NoError(t, err)
	require.True(t, ok)

	before := serverMs(t, ctx, rdb)
	ids, err := s.AcquirePermits(ctx, 2, 30*time.Second)
	require.NoError(t, err)
	after := serverMs(t, ctx, rdb)
	require.Len(t, ids, 2)
	assert.NotEqual(t, ids[0], ids[1])
	members, err := rdb.ZRangeWithScores(ctx, "{pl}:timeout", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, members, 2)
	want := map[string]bool{permitMember(t, ids[0]): true, permitMember(t, ids[1]): true}
	for i, m := range members {
		assert.Regexp(t, "^[0-9a-f]{32}$", ids[i], "ids are given out as Redisson's: 32 lower-case hex digits")
		assert.True(t, want[m.Member.(string)], "member %x is one of the ids' raw bytes", m.Member)
		assert.GreaterOrEqual(t, int64(m.Score), before+30_000)
		assert.LessOrEqual(t, int64(m.Score), after+30_000)
	}
	assert.Equal(t, "1", rdb.Get(ctx, "pl").Val())
	assert.Zero(t, rdb.Exists(ctx, "redisson__timeout__set:{pl}").Val(), "nothing under the old key")
	assert.Equal(t, "zset", rdb.Type(ctx, "{pl}:timeout").Val())

	// A permit without lease gets Redisson's "never".
	id, err := s.Acquire(ctx, 0)
	require.NoError(t, err)
	score, err := rdb.ZScore(ctx, "{pl}:timeout", permitMember(t, id)).Result()
	require.NoError(t, err)
	assert.Equal(t, redissonNever, strconv.FormatFloat(score, 'f', -1, 64))

	sub := rdb.Subscribe(ctx, "redisson_sc:{pl}")
	defer sub.Close()
	_, err = sub.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, append(ids, id)...))
	select {
	case m := <-sub.Channel():
		assert.Equal(t, "3", m.Payload, "the new count")
	case <-time.After(5 * time.Second):
		t.Fatal("the release published nothing")
	}
	assert.Equal(t, "3", rdb.Get(ctx, "pl").Val())
	assert.Zero(t, rdb.Exists(ctx, "{pl}:timeout").Val())

	// As Redisson's, the ZSET takes the TTL the permits key has.
	require.NoError(t, rdb.PExpire(ctx, "pl", time.Minute).Err())
	id, err = s.Acquire(ctx, time.Minute)
	require.NoError(t, err)
	assert.Greater(t, rdb.PTTL(ctx, "{pl}:timeout").Val(), 50*time.Second)
	require.NoError(t, s.Release(ctx, id))

	// A name with a hash tag keeps it: name + ":timeout".
	tagged := rt.PermitExpirableSemaphore("pl{t}")
	_, err = tagged.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	id, err = tagged.Acquire(ctx, time.Minute)
	require.NoError(t, err)
	assert.NoError(t, rdb.ZScore(ctx, "pl{t}:timeout", permitMember(t, id)).Err())

	for _, n := range []int64{0, -1, primitive.MaxPermitsPerCall + 1} {
		_, err := s.AcquirePermits(ctx, n, time.Second)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, "n=%d", n)
		_, _, err = s.TryAcquirePermits(ctx, n, time.Second)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, "n=%d", n)
	}
	_, err = s.AcquirePermits(ctx, 1, -time.Second)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	held, err := s.AcquirePermits(ctx, 2, time.Minute)
	require.NoError(t, err)
	for _, bad := range [][]string{nil, {"xyz"}, {held[0][:30]}, {held[0] + "00"}, {held[0], held[1], held[0]}, {held[0], ""}} {
		assert.ErrorIs(t, s.Release(ctx, bad...), actorlock.ErrInvalidArgument, "%q", bad)
	}
	assert.Equal(t, "1", rdb.Get(ctx, "pl").Val(), "a refused release releases nothing")
	assert.EqualValues(t, 2, rdb.ZCard(ctx, "{pl}:timeout").Val())
	// Upper-case hex is the same id (Redisson decodes either case).
	require.NoError(t, s.Release(ctx, strings.ToUpper(held[0]), held[1]))
	assert.Equal(t, "3", rdb.Get(ctx, "pl").Val())
}

// A permit Redisson takes with a 1 s lease and never releases reaches our
// waiter when the lease ends (not a recheck later), and Redisson's release
// wakes our waiter by its message.
func TestRedissonExpiredPermitReachesOurWaiter(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	java := redissonPES{rdb: rdb, name: "rx"}
	s := rt.PermitExpirableSemaphore("rx")
	ok, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)

	taken := time.Now()
	javaIDs, _ := java.tryAcquire(t, ctx, 1, time.Second)
	require.Len(t, javaIDs, 1)
	id, err := s.Acquire(ctx, 0)
	require.NoError(t, err)
	took := time.Since(taken)
	t.Logf("our waiter got the permit %v after Redisson took it with a 1 s lease", took)
	assert.GreaterOrEqual(t, took, 990*time.Millisecond)
	assert.Less(t, took, 1500*time.Millisecond)
	assert.False(t, java.release(t, ctx, javaIDs[0]), "Redisson's late release is refused")
	assert.EqualValues(t, 0, java.available(t, ctx), "our permit is held")

	// Redisson holds the permit (no lease); our waiter wakes by its release.
	require.NoError(t, s.Release(ctx, id))
	javaIDs, _ = java.tryAcquire(t, ctx, 1, -1)
	require.Len(t, javaIDs, 1)
	got := make(chan string, 1)
	go func() {
		id, err := s.Acquire(ctx, time.Minute)
		assert.NoError(t, err)
		got <- id
	}()
	waitSubscribers(t, ctx, rdb, "redisson_sc:{rx}", 1)
	released := time.Now()
	assert.True(t, java.release(t, ctx, javaIDs[0]))
	select {
	case id = <-got:
		t.Logf("woken %v after Redisson's release", time.Since(released))
		assert.Less(t, time.Since(released), 500*time.Millisecond, "by the message, not the recheck")
	case <-time.After(5 * time.Second):
		t.Fatal("Redisson's release did not reach our waiter")
	}
	assert.NoError(t, rdb.ZScore(ctx, "{rx}:timeout", permitMember(t, id)).Err())
}

// A permit we take with a 1 s lease and never release is reclaimed by
// Redisson's acquire, which sees our expiry as the earliest one.
func TestRedissonReclaimsOurExpiredPermit(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	java := redissonPES{rdb: rdb, name: "ry"}
	s := rt.PermitExpirableSemaphore("ry")
	ok, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)

	taken := time.Now()
	id, err := s.Acquire(ctx, time.Second)
	require.NoError(t, err)
	score, err := rdb.ZScore(ctx, "{ry}:timeout", permitMember(t, id)).Result()
	require.NoError(t, err)
	ids, nearest := java.tryAcquire(t, ctx, 1, 10*time.Second)
	assert.Nil(t, ids)
	assert.Equal(t, int64(score), nearest, "Redisson waits for our permit's expiry")

	javaIDs := java.acquire(t, ctx, 1, 10*time.Second)
	took := time.Since(taken)
	t.Logf("Redisson got the permit %v after we took it with a 1 s lease", took)
	assert.GreaterOrEqual(t, took, 990*time.Millisecond)
	assert.Less(t, took, 1500*time.Millisecond)
	require.Len(t, javaIDs, 1)
	assert.ErrorIs(t, s.Release(ctx, id), actorlock.ErrPermitExpired)
	assert.Equal(t, "0", rdb.Get(ctx, "ry").Val(), "Redisson holds it; our late release gave nothing back")
	assert.True(t, java.release(t, ctx, javaIDs[0]))
	avail, err := s.Available(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, avail)
}

// Several permits at once, both ways: our AcquirePermits and Redisson's
// acquire(permits) share the pool; Redisson releases our ids and we its;
// Redisson's multi-id release publishes how many came back (3), which must
// still wake our waiter for 4.
func TestPermitMultiAcquireInterop(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	java := redissonPES{rdb: rdb, name: "rm"}
	s := rt.PermitExpirableSemaphore("rm")
	ok, err := s.TrySetPermits(ctx, 5)
	require.NoError(t, err)
	require.True(t, ok)

	ours, err := s.AcquirePermits(ctx, 3, 10*time.Second)
	require.NoError(t, err)
	require.Len(t, ours, 3)
	score, err := rdb.ZScore(ctx, "{rm}:timeout", permitMember(t, ours[0])).Result()
	require.NoError(t, err)
	for _, id := range ours[1:] {
		sc, err := rdb.ZScore(ctx, "{rm}:timeout", permitMember(t, id)).Result()
		require.NoError(t, err)
		assert.Equal(t, score, sc, "one lease for all")
	}
	ids, nearest := java.tryAcquire(t, ctx, 3, time.Minute)
	assert.Nil(t, ids, "Redisson cannot take 3 of 2")
	assert.Equal(t, int64(score), nearest)
	theirs, _ := java.tryAcquire(t, ctx, 2, time.Minute)
	require.Len(t, theirs, 2)
	_, ok, err = s.TryAcquirePermits(ctx, 1, time.Second)
	require.NoError(t, err)
	assert.False(t, ok)

	got := make(chan []string, 1)
	go func() {
		ids, err := s.AcquirePermits(ctx, 4, 0)
		assert.NoError(t, err)
		got <- ids
	}()
	waitSubscribers(t, ctx, rdb, "redisson_sc:{rm}", 1)
	assert.Equal(t, 2, java.releaseAll(t, ctx, theirs))
	select {
	case <-got:
		t.Fatal("took 4 permits with 2 available")
	case <-time.After(300 * time.Millisecond):
	}
	released := time.Now()
	assert.Equal(t, 3, java.releaseAll(t, ctx, ours), "Redisson releases our ids")
	var four []string
	select {
	case four = <-got:
		t.Logf("woken %v after Redisson released 3", time.Since(released))
		assert.Less(t, time.Since(released), 500*time.Millisecond, "by the message, not the recheck")
	case <-time.After(5 * time.Second):
		t.Fatal("our waiter for 4 was not woken")
	}
	require.Len(t, four, 4)
	assert.Equal(t, "1", rdb.Get(ctx, "rm").Val())
	for _, id := range four {
		score, err := rdb.ZScore(ctx, "{rm}:timeout", permitMember(t, id)).Result()
		require.NoError(t, err)
		assert.Equal(t, redissonNever, strconv.FormatFloat(score, 'f', -1, 64), "no lease: Redisson's never")
	}

	// Our release of several ids, one not held: the held ones go back, and
	// the caller learns that one was not.
	err = s.Release(ctx, four[0], four[1], ours[0])
	assert.ErrorIs(t, err, actorlock.ErrPermitExpired)
	assert.Equal(t, "3", rdb.Get(ctx, "rm").Val())
	javaIDs := java.acquire(t, ctx, 3, -1)
	require.NoError(t, s.Release(ctx, javaIDs...), "we release Redisson's ids")
	require.NoError(t, s.Release(ctx, four[2:]...))
	assert.Equal(t, "5", rdb.Get(ctx, "rm").Val())
	assert.Zero(t, rdb.Exists(ctx, "{rm}:timeout").Val())
}

// UpdateLeaseTime extends a permit past its first lease (Redisson does not
// reclaim it meanwhile), removes its expiry with 0, refuses unknown and
// malformed ids, and cannot revive a permit whose lease ran out; Redisson's
// updateLeaseTime works on our permit and ours on Redisson's.
func TestPermitUpdateLeaseTime(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	java := redissonPES{rdb: rdb, name: "ru"}
	s := rt.PermitExpirableSemaphore("ru")
	ok, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)

	id, err := s.Acquire(ctx, time.Second)
	require.NoError(t, err)
	before := serverMs(t, ctx, rdb)
	require.NoError(t, s.UpdateLeaseTime(ctx, id, 4*time.Second))
	after := serverMs(t, ctx, rdb)
	score := int64(rdb.ZScore(ctx, "{ru}:timeout", permitMember(t, id)).Val())
	assert.GreaterOrEqual(t, score, before+4000)
	assert.LessOrEqual(t, score, after+4000)
	time.Sleep(1500 * time.Millisecond) // past the first lease
	ids, nearest := java.tryAcquire(t, ctx, 1, time.Second)
	assert.Nil(t, ids, "the extended permit is still held")
	assert.Equal(t, score, nearest)
	assert.EqualValues(t, 0, java.available(t, ctx))

	require.NoError(t, s.UpdateLeaseTime(ctx, id, 0))
	score = int64(rdb.ZScore(ctx, "{ru}:timeout", permitMember(t, id)).Val())
	assert.Equal(t, redissonNever, strconv.FormatInt(score, 10))
	ids, nearest = java.tryAcquire(t, ctx, 1, time.Second)
	assert.Nil(t, ids)
	assert.Zero(t, nearest, "a permit without lease is no expiry to wait for")

	var unknown [16]byte
	_, _ = rand.Read(unknown[:])
	assert.ErrorIs(t, s.UpdateLeaseTime(ctx, hex.EncodeToString(unknown[:]), time.Second), actorlock.ErrPermitExpired)
	for _, bad := range []string{"", "zz", id[:31], id + "0"} {
		assert.ErrorIs(t, s.UpdateLeaseTime(ctx, bad, time.Second), actorlock.ErrInvalidArgument, "%q", bad)
	}
	assert.ErrorIs(t, s.UpdateLeaseTime(ctx, id, -time.Second), actorlock.ErrInvalidArgument)

	// Redisson shortens our permit's lease; once it runs out, ours cannot
	// bring it back.
	assert.True(t, java.updateLeaseTime(t, ctx, id, time.Second))
	time.Sleep(1200 * time.Millisecond)
	assert.ErrorIs(t, s.UpdateLeaseTime(ctx, id, time.Minute), actorlock.ErrPermitExpired)
	assert.Equal(t, "1", rdb.Get(ctx, "ru").Val(), "the update reclaimed it first")
	assert.ErrorIs(t, s.Release(ctx, id), actorlock.ErrPermitExpired)

	// Ours on Redisson's permit.
	javaIDs, _ := java.tryAcquire(t, ctx, 1, time.Second)
	require.Len(t, javaIDs, 1)
	require.NoError(t, s.UpdateLeaseTime(ctx, javaIDs[0], time.Minute))
	assert.Greater(t, int64(rdb.ZScore(ctx, "{ru}:timeout", permitMember(t, javaIDs[0])).Val()), serverMs(t, ctx, rdb)+50_000)
	assert.True(t, java.release(t, ctx, javaIDs[0]))
}

// Permits a previous actorlock recorded under redisson__timeout__set:{name}
// (hex text ids) are still reclaimed when expired, released when live, and
// moved to the new ZSET by a lease update.
func TestLegacyPermitsAreReclaimed(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	s := rt.PermitExpirableSemaphore("rl")
	const legacy = "redisson__timeout__set:{rl}"
	newID := func() string {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	expired, live, moved := newID(), newID(), newID()
	now := serverMs(t, ctx, rdb)
	// 4 permits, 3 taken by the previous version.
	require.NoError(t, rdb.Set(ctx, "rl", 1, 0).Err())
	require.NoError(t, rdb.ZAdd(ctx, legacy,
		redis.Z{Score: float64(now - 1000), Member: expired},
		redis.Z{Score: float64(now + 60_000), Member: live},
		redis.Z{Score: float64(now + 60_000), Member: moved}).Err())

	avail, err := s.Available(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, avail, "the expired legacy permit came back")
	left, err := rdb.ZRange(ctx, legacy, 0, -1).Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{live, moved}, left)

	require.NoError(t, s.Release(ctx, live))
	assert.Equal(t, "3", rdb.Get(ctx, "rl").Val())
	require.NoError(t, s.UpdateLeaseTime(ctx, moved, time.Minute))
	assert.Zero(t, rdb.Exists(ctx, legacy).Val())
	assert.NoError(t, rdb.ZScore(ctx, "{rl}:timeout", permitMember(t, moved)).Err())
	require.NoError(t, s.Release(ctx, moved))
	assert.Equal(t, "4", rdb.Get(ctx, "rl").Val())
	assert.ErrorIs(t, s.Release(ctx, expired), actorlock.ErrPermitExpired)
}
