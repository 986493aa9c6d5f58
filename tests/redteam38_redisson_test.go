package tests

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// Evidence for pass 38's question 4 (passes on the code): Redisson's own
// lock scripts (redisson/redisson master: RedissonLock, LockTask,
// RedissonFencedLock, RedissonFairLock), run against a lock HASH that
// carries actorlock's holds' mark, act on their owner's field alone and
// delete the whole HASH, mark included, on their last unlock.

// Redisson's RLock unlock (RedissonLock.unlockInnerAsync): KEYS lock,
// channel, unlock latch; ARGV message, lease, owner, publish command, latch ms.
const redissonUnlock = `local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0;
else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;`

// Redisson's watchdog renewal (renewal.LockTask).
const redissonRenew = `local result = {} for i = 1, #KEYS, 1 do
if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then redis.call('pexpire', KEYS[i], ARGV[1]); table.insert(result, 1);
else table.insert(result, 0); end; end; return result;`

// Redisson's RFencedLock tryLock (RedissonFencedLock, EVAL_LONG_LIST).
const redissonFencedLock = `if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
local token = redis.call('incr', KEYS[2]); redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]);
return {-1, token}; end; return {redis.call('pttl', KEYS[1]), -1};`

// Redisson's RFairLock unlock (RedissonFairLock.unlockInnerAsync): KEYS
// lock, queue, timeouts, channel, latch; ARGV message, lease, owner, now ms,
// publish command, latch ms.
const redissonFairUnlock = `local val = redis.call('get', KEYS[5]); if val ~= false then return tonumber(val); end;
while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0); if firstThreadId2 == false then break; end;
local timeout = redis.call('zscore', KEYS[3], firstThreadId2);
if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); else break; end; end;
if (redis.call('exists', KEYS[1]) == 0) then local nextThreadId = redis.call('lindex', KEYS[2], 0);
if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; redis.call('set', KEYS[5], 1, 'px', ARGV[6]); return 1; end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[5], 0, 'px', ARGV[6]); return 0; end;
redis.call('del', KEYS[1]); redis.call('set', KEYS[5], 1, 'px', ARGV[6]);
local nextThreadId = redis.call('lindex', KEYS[2], 0); if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1;`

func TestRedTeam38RedissonScriptsPassOverTheHoldsMark(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	const owner = "6f1c1a52-8c1e-4b43-a3f5-1f2e3d4c5b6a:38"
	unlock := func(name, latch string) int64 {
		v, err := rdb.Eval(ctx, redissonUnlock, []string{name, "redisson_lock__channel:{" + name + "}", "redisson_unlock_latch:{" + name + "}:" + latch}, 0, 30000, owner, "publish", 2000).Int64()
		require.NoError(t, err)
		return v
	}
	for _, fair := range []bool{false, true} {
		name := "rt38-redisson-mark"
		l := rt.Lock(name, actorlock.WithOwner(owner))
		if fair {
			name += "-fair"
			l = rt.FairLock(name, actorlock.WithOwner(owner))
		}
		h, err := l.Acquire(ctx)
		require.NoError(t, err)
		mark := rdb.HGet(ctx, name, "actorlock_hold").Val()
		require.NotEmpty(t, mark, "actorlock's grant marks the holds")
		// The Redisson thread of the same id re-enters: RLock, then RFencedLock.
		require.ErrorIs(t, rdb.Eval(ctx, redissonLock, []string{name}, 30000, owner).Err(), redis.Nil, "RLock re-enters")
		fenced, err := rdb.Eval(ctx, redissonFencedLock, []string{name, "redisson_lock_token:{" + name + "}"}, 30000, owner).Int64Slice()
		require.NoError(t, err)
		require.EqualValues(t, -1, fenced[0], "RFencedLock re-enters")
		require.Equal(t, "3", rdb.HGet(ctx, name, owner).Val(), "getHoldCount")
		renewed, err := rdb.Eval(ctx, redissonRenew, []string{name}, 30000, owner).Int64Slice()
		require.NoError(t, err)
		require.Equal(t, []int64{1}, renewed, "Redisson's watchdog renews the hold")
		// Another thread is refused (RLock answers the TTL).
		require.NoError(t, rdb.Eval(ctx, redissonLock, []string{name}, 30000, "another:1").Err(), "RLock refuses another thread")
		if fair {
			now := time.Now().UnixMilli()
			v, err := rdb.Eval(ctx, redissonFairUnlock, []string{name, "redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}", "redisson_lock__channel:{" + name + "}", "redisson_unlock_latch:{" + name + "}:a"}, 0, 30000, owner, now, "publish", 2000).Int64()
			require.NoError(t, err)
			require.EqualValues(t, 0, v, "RFairLock's unlock: still held")
		} else {
			require.EqualValues(t, 0, unlock(name, "a"), "RLock's unlock: still held")
		}
		require.EqualValues(t, 0, unlock(name, "b"), "RLock's unlock: still held")
		require.Equal(t, mark, rdb.HGet(ctx, name, "actorlock_hold").Val(), "Redisson leaves the mark alone")
		require.NoError(t, h.Unlock(ctx))
		require.Zero(t, rdb.Exists(ctx, name).Val(), "actorlock's last unlock deletes the lock, mark and all")
		// Redisson's last unlock deletes an actorlock-marked HASH too.
		h, err = l.Acquire(ctx)
		require.NoError(t, err)
		require.ErrorIs(t, rdb.Eval(ctx, redissonLock, []string{name}, 30000, owner).Err(), redis.Nil)
		require.NoError(t, h.Unlock(ctx))
		require.EqualValues(t, 1, unlock(name, "c"), "RLock's last unlock frees the lock")
		require.Zero(t, rdb.Exists(ctx, name).Val(), "mark and all")
	}
}
