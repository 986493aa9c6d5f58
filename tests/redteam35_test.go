package tests

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// The thirty-fifth red-team pass, over a fix tried for RT34-1 and dropped
// for what RT35-2 shows (Grant.Prior: a newer give-back's token would go to
// a WithOwner id's older give-backs when its grant's prior counter is their
// token); RT34-1 is fixed by a bound in the server's clock instead
// (heldUntil, actors/giveback.go).

// RT35-1 (liveness, "A lost hold is given back" broken; runtime-made ids
// too): giveBack hands a newer sight's token only between counter sides
// (counter(u.write) && counter(write)); a read grant moves the fencing
// counter too, but a read give-back never hands its token on. So a read
// under a write that lands late (after the write's validity) leaves the
// write's give-back (write count 1, T1) to meet the counter at the read's
// T3: refused and dropped. The read's give-back deletes only the read; the
// write field stays for the read's watchdog lease (30 s, not the write's
// 1.5 s), held by nobody.
//
// rwLateReadUnderLostWrite: X writes with a 1.5 s LeaseTime; X's read
// under that write (the watchdog's lease) runs in Redis while the write is
// there, but its reply comes back 1.3 s late, after the write's validity.
func rwLateReadUnderLostWrite(t *testing.T, withOwner bool) {
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(3*time.Second))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 60*time.Second)
	name, owner := "rt35-rw-late-read", "owner-rt35-1"
	var opts []actorlock.LockOption
	if withOwner {
		opts = append(opts, actorlock.WithOwner(owner))
	} else {
		name += "-own"
	}
	rw := rt1.ReadWriteLock(name, opts...)
	w, err := rw.WriteLocker().Acquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
	require.NoError(t, err)
	if !withOwner {
		for f := range direct.HGetAll(ctx, name).Val() {
			if f != "mode" {
				owner = f[:len(f)-len(":write")]
			}
		}
	}
	t.Logf("write held by %s, token %d: Redis %v", owner, w.Token(), direct.HGetAll(ctx, name).Val())
	time.Sleep(500 * time.Millisecond)
	late := p.on(1, delayReply, 1300*time.Millisecond, func(c respCommand) bool { return isGuardedAcquire(c, name, owner) && !settling(c) })
	undos := p.on(10, delayReply, 0, func(c respCommand) bool {
		return isRelease(c, name, owner, true) || isRelease(c, name, owner+":write", true)
	})
	read := make(chan gotHold, 1)
	go func() {
		rctx := ctx
		if !withOwner {
			rctx = w.Context()
		}
		h, err := rw.ReadLocker().TryAcquire(rctx) // the watchdog's lease
		read <- gotHold{h, err}
	}()
	await(t, late.hits, 2*time.Second, "the read under the write, on its way")
	select {
	case <-w.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the write's Done stays open past its lease")
	}
	got := await(t, read, 3*time.Second, "the read's answer")
	t.Logf("the read: %v", got.err)
	if got.err == nil {
		require.NoError(t, got.h.Unlock(ctx))
	}
	time.Sleep(500 * time.Millisecond) // the give-backs run
	for len(undos.ran) > 0 {
		_, argv, _ := (<-undos.ran).script()
		t.Logf("give-back run: %v", argv)
	}
	t.Logf("Redis after the give-backs: %v (PTTL %v), counter %v", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val(), direct.Get(ctx, "redisson_lock_token:{"+name+"}").Val())
	// The write's 1.5 s lease has ended, the read was given back: nobody
	// holds the lock.
	h, err := other.ReadWriteLock(name).WriteLocker().Acquire(ctx, actorlock.WaitTime(3*time.Second))
	if err == nil {
		_ = h.Unlock(ctx)
	}
	require.NoError(t, err, "another owner's write, 3 s after X's write was lost and its read given back (Redis: %v, PTTL %v)", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	again, err := rw.WriteLocker().Acquire(ctx, actorlock.WaitTime(5*time.Second))
	require.NoError(t, err)
	// A handle without WithOwner acquires as the owner its ctx names: a
	// new one here, whose fresh hold counts 1 as well.
	assert.Equal(t, "1", direct.HGet(ctx, name, again.Owner()+":write").Val(), "X's next write starts a fresh hold")
	require.NoError(t, again.Unlock(ctx))
}

func TestRedTeam35LateReadUnderALostWriteStrandsTheWrite(t *testing.T) {
	t.Parallel()
	rwLateReadUnderLostWrite(t, true)
}

func TestRedTeam35LateReadUnderALostWriteStrandsTheWriteOwnID(t *testing.T) {
	t.Parallel()
	rwLateReadUnderLostWrite(t, false)
}

// redissonLock is Redisson's RLock acquire script (RedissonLock
// .tryLockInnerAsync): it takes or re-enters the hash and never touches
// the fencing counter (only RFencedLock does).
const redissonLock = `if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);`

// RT35-2: X (a Redisson thread's id, WithOwner) holds here with a 1.5 s
// LeaseTime and re-enters; the re-entry is held back 2 s on its way. The
// hold expires (locally and in Redis): its give-back U (count 1, T1) waits
// for the re-entry's outcome. The Redisson thread X then takes the lock
// afresh (RLock: the counter stays at T1). The re-entry lands on that hold
// (count 2, T3, prior T1: nothing moved the counter between), and is given
// back (V: count 2, T3). Had T3 gone to U because the counter's prior value
// was U's token (a "prior chain", the fix first tried for RT34-1, never
// shipped), V would run (count 1) and U, finding count 1 and T3, delete the
// Redisson thread's hold. It guards that no such proof comes back: T3 came
// after U's holds' validity, and U keeps T1.
func TestRedTeam35PriorChainHandsATokenAcrossARedissonHold(t *testing.T) {
	t.Parallel()
	p, direct, rt1 := proxied(t, actorlock.WithCallTimeout(5*time.Second))
	other := newRuntime(t, direct)
	ctx := ctxFor(t, 60*time.Second)
	const name, owner = "rt35-prior-chain-redisson", "6f1c1a52-8c1e-4b43-a3f5-1f2e3d4c5b6a:42"
	l1 := rt1.Lock(name, actorlock.WithOwner(owner))
	outer, err := l1.Acquire(ctx, actorlock.LeaseTime(1500*time.Millisecond))
	require.NoError(t, err)
	t.Logf("outer token T1 = %d", outer.Token())
	time.Sleep(300 * time.Millisecond)
	late := p.on(1, holdCommand, 2*time.Second, func(c respCommand) bool { return isGuardedAcquire(c, name, owner) && !settling(c) })
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
		t.Fatal("the outer hold's Done stays open past its lease")
	}
	for direct.Exists(ctx, name).Val() != 0 {
		time.Sleep(5 * time.Millisecond)
	}
	// The Redisson thread X takes the free lock (RLock, 20 s lease).
	require.ErrorIs(t, direct.Eval(ctx, redissonLock, []string{name}, 20000, owner).Err(), redis.Nil, "Redisson's RLock answers nil when it takes the lock")
	t.Logf("Redisson's X holds: %v, counter %v", direct.HGetAll(ctx, name).Val(), direct.Get(ctx, "redisson_lock_token:{"+name+"}").Val())
	await(t, late.ran, 3*time.Second, "the re-entry reaches Redis")
	t.Logf("the re-entry ran: Redis %v, counter %v", direct.HGetAll(ctx, name).Val(), direct.Get(ctx, "redisson_lock_token:{"+name+"}").Val())
	got := await(t, reentered, 3*time.Second, "the re-entry's answer")
	t.Logf("the re-entry: %v", got.err)
	if got.err == nil {
		require.NoError(t, got.h.Unlock(ctx))
	}
	time.Sleep(700 * time.Millisecond) // the give-backs run
	for len(undos.ran) > 0 {
		_, argv, _ := (<-undos.ran).script()
		t.Logf("give-back run: holds %s, expecting count %s and token %s", argv[1], argv[3], argv[4])
	}
	t.Logf("Redis after the give-backs: %v (PTTL %v)", direct.HGetAll(ctx, name).Val(), direct.PTTL(ctx, name).Val())
	// The Redisson thread still holds the lock (its lease: 20 s): nobody
	// else may get it.
	assert.Equal(t, "1", direct.HGet(ctx, name, owner).Val(), "the Redisson thread's hold, which it took after ours expired")
	if h, err := other.Lock(name).TryAcquire(ctx); err == nil {
		_ = h.Unlock(ctx)
		t.Fatalf("another owner got the lock (token %d) while the Redisson thread X holds it", h.Token())
	}
}
