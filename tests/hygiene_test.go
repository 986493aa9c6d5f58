package tests

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// keysWithoutExpiry lists the keys of rdb that have no TTL (PTTL -1).
func keysWithoutExpiry(t *testing.T, ctx context.Context, rdb *redis.Client) []string {
	t.Helper()
	var left []string
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if ttl, err := rdb.PTTL(ctx, iter.Val()).Result(); err == nil && ttl == -1 {
			left = append(left, iter.Val())
		}
	}
	require.NoError(t, iter.Err())
	return left
}

// Issue 25 item 1: with default options, names used by every kind of lock
// and released leave no key without an expiry in Redis (the fencing counter
// expires after the name's last use), so Redis memory is bounded by the
// names in use, not by every name ever locked.
func TestReleasedNamesLeaveNoPermanentKey(t *testing.T) {
	t.Parallel()
	srv, rdb, rt := setup(t)
	other := newRuntime(t, client(t, srv.Addr))
	ctx := ctxFor(t, 120*time.Second)
	const names = 200

	kinds := map[string]func(rt *actorlock.Runtime, name string) *actorlock.Lock{
		"lock":  func(rt *actorlock.Runtime, n string) *actorlock.Lock { return rt.Lock(n) },
		"fair":  func(rt *actorlock.Runtime, n string) *actorlock.Lock { return rt.FairLock(n) },
		"read":  func(rt *actorlock.Runtime, n string) *actorlock.Lock { return rt.ReadWriteLock(n).ReadLocker() },
		"write": func(rt *actorlock.Runtime, n string) *actorlock.Lock { return rt.ReadWriteLock(n).WriteLocker() },
	}
	var wg sync.WaitGroup
	for kind, lockOf := range kinds {
		for i := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("%s:%d", kind, i)
				// Held, re-entered, then contended by another runtime
				// (queued fair waiter, remote waiter woken by the unlock).
				h, err := lockOf(rt, name).Acquire(ctx)
				if !assert.NoError(t, err, name) {
					return
				}
				inner, err := lockOf(rt, name).Acquire(h.Context())
				if !assert.NoError(t, err, name) {
					return
				}
				got := make(chan error, 1)
				if i%4 == 0 {
					go func() {
						w, err := lockOf(other, name).Acquire(ctx, actorlock.WaitTime(30*time.Second))
						if err == nil {
							err = w.Unlock(ctx)
						}
						got <- err
					}()
				} else {
					got <- nil
				}
				assert.NoError(t, inner.Unlock(ctx), name)
				assert.NoError(t, h.Unlock(ctx), name)
				assert.NoError(t, <-got, name)
			}()
		}
	}
	wg.Wait()
	left := keysWithoutExpiry(t, ctx, rdb)
	t.Logf("%d names of 4 kinds, released: %d keys without expiry", 4*names, len(left))
	if len(left) > 5 {
		left = left[:5]
	}
	assert.Empty(t, left, "keys without expiry after every name was released")
}

// Issue 25 item 3: one kind per name. A reentrant or fair lock and a
// read-write lock on one name refuse each other with ErrWrongKind, in
// every direction, whoever asks (another owner, or the holder's own owner
// id) and however (one attempt or waiting), leaving the existing hold as it
// was; so does a key of another Redis type. (A reentrant and a fair lock
// share Redisson's hash layout and exclude each other instead.)
func TestOneKindPerName(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 60*time.Second)
	type kind struct {
		name string
		of   func(name string, opts ...actorlock.LockOption) *actorlock.Lock
	}
	plain := kind{"lock", func(n string, o ...actorlock.LockOption) *actorlock.Lock { return rt.Lock(n, o...) }}
	fair := kind{"fair", func(n string, o ...actorlock.LockOption) *actorlock.Lock { return rt.FairLock(n, o...) }}
	read := kind{"read", func(n string, o ...actorlock.LockOption) *actorlock.Lock {
		return rt.ReadWriteLock(n, o...).ReadLocker()
	}}
	write := kind{"write", func(n string, o ...actorlock.LockOption) *actorlock.Lock {
		return rt.ReadWriteLock(n, o...).WriteLocker()
	}}
	refuses := func(t *testing.T, l *actorlock.Lock) {
		t.Helper()
		_, err := l.TryAcquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrWrongKind, "TryAcquire")
		assert.ErrorContains(t, err, fmt.Sprintf("%q", l.Name()))
		start := time.Now()
		_, err = l.Acquire(ctx, actorlock.WaitTime(5*time.Second))
		assert.ErrorIs(t, err, actorlock.ErrWrongKind, "Acquire")
		assert.Less(t, time.Since(start), 4*time.Second, "refused, not waited for")
	}
	for _, pair := range [][2]kind{
		{plain, read}, {plain, write}, {fair, read}, {fair, write},
		{read, plain}, {read, fair}, {write, plain}, {write, fair},
	} {
		held, asked := pair[0], pair[1]
		t.Run(held.name+"-then-"+asked.name, func(t *testing.T) {
			name := "kinds:" + held.name + ":" + asked.name
			h, err := held.of(name).Acquire(ctx)
			require.NoError(t, err)
			before := rdb.HGetAll(ctx, name).Val()
			refuses(t, asked.of(name))
			// The holder's own owner id, which the hash names: no re-entry
			// across kinds.
			refuses(t, asked.of(name, actorlock.WithOwner(h.Owner())))
			assert.Equal(t, before, rdb.HGetAll(ctx, name).Val(), "the hold's hash is untouched")
			assert.NoError(t, h.Err(), "the hold is still valid")
			require.NoError(t, h.Unlock(ctx))
			assert.Zero(t, rdb.Exists(ctx, name).Val())
			// Once free, the name takes the other kind.
			h, err = asked.of(name).TryAcquire(ctx)
			require.NoError(t, err)
			require.NoError(t, h.Unlock(ctx))
		})
	}
	t.Run("other-redis-types", func(t *testing.T) {
		require.NoError(t, rdb.Set(ctx, "kinds:string", "x", 0).Err())
		require.NoError(t, rdb.RPush(ctx, "kinds:list", "x").Err())
		require.NoError(t, rdb.SAdd(ctx, "kinds:set", "x").Err())
		for _, name := range []string{"kinds:string", "kinds:list", "kinds:set"} {
			typ := rdb.Type(ctx, name).Val()
			for _, k := range []kind{plain, fair, read, write} {
				t.Run(name+"/"+k.name, func(t *testing.T) {
					refuses(t, k.of(name))
					assert.Equal(t, typ, rdb.Type(ctx, name).Val(), "the key is untouched")
				})
			}
		}
	})
}

// Issue 25 item 4: WithCallTimeout bounds a call against a frozen Redis
// (SIGSTOP) with any client: at go-redis's defaults (no
// ContextTimeoutEnabled: its 3 s read timeout, not the context, would end
// the call) as with ContextTimeoutEnabled. The error says what happened
// and is a context.DeadlineExceeded; what the frozen call may have taken
// is given back once Redis answers again.
func TestCallTimeoutHoldsWithAnyClient(t *testing.T) {
	t.Parallel()
	const callTimeout = 1500 * time.Millisecond
	for _, tc := range []struct {
		name string
		opts redis.Options
	}{
		{"client-defaults", redis.Options{}},
		{"context-timeout-enabled", redis.Options{ContextTimeoutEnabled: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startRedis(t)
			opts := tc.opts
			opts.Addr = srv.Addr
			rdb := redis.NewClient(&opts)
			t.Cleanup(func() { _ = rdb.Close() })
			rt := newRuntime(t, rdb, actorlock.WithCallTimeout(callTimeout))
			ctx := ctxFor(t, 60*time.Second)
			l, sem := rt.Lock("frozen"), rt.Semaphore("frozen-sem")
			// Scripts loaded and connections open before the freeze.
			h, err := l.TryAcquire(ctx)
			require.NoError(t, err)
			require.NoError(t, h.Unlock(ctx))
			_, err = sem.TrySetPermits(ctx, 1)
			require.NoError(t, err)

			require.NoError(t, srv.Pause())
			resumed := false
			defer func() {
				if !resumed {
					_ = srv.Resume()
				}
			}()
			// The caller's context has no deadline: only the call timeout
			// bounds the call.
			start := time.Now()
			_, err = l.TryAcquire(context.Background())
			took := time.Since(start)
			t.Logf("TryAcquire against a frozen Redis: %v (call timeout %v): %v", took, callTimeout, err)
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.ErrorContains(t, err, `"frozen"`)
			assert.ErrorContains(t, err, "Redis did not answer within the call timeout of 1.5s")
			// The call timeout plus its shared-deadline window (75 ms here),
			// and scheduling slack; well under go-redis's 3 s read timeout.
			assert.Less(t, took, callTimeout+time.Second, "bounded by the call timeout")
			assert.GreaterOrEqual(t, took, callTimeout, "not before the call timeout")

			start = time.Now()
			_, err = sem.TryAcquire(context.Background(), 1)
			took = time.Since(start)
			t.Logf("Semaphore.TryAcquire against a frozen Redis: %v: %v", took, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, took, callTimeout+time.Second, "bounded by the call timeout")

			require.NoError(t, srv.Resume())
			resumed = true
			// The frozen TryAcquire's script ran when Redis woke up; its
			// acquisition is given back, not left held by nobody until
			// the watchdog lease (30 s) ends.
			other := newRuntime(t, client(t, srv.Addr))
			require.Eventually(t, func() bool {
				h, err := other.Lock("frozen").TryAcquire(ctx)
				return err == nil && h.Unlock(ctx) == nil
			}, 10*time.Second, 50*time.Millisecond, "the lock is free again")
		})
	}
}

// Issue 27 item 3: an overdue backlog (a restart, no mover running) moves
// earliest-due first, as Redisson's transfer takes it from its timeout
// ZSET, not in the order the items were offered; in bounded batches. Items
// due at the same ms keep the order offered (issue 33 J).
func TestDelayedQueueMovesABacklogEarliestDueFirst(t *testing.T) {
	t.Parallel()
	srv, rdb, _ := setup(t)
	ctx := ctxFor(t, 60*time.Second)
	const name, count = "dq-bulk", 250 // the name and payloads startMonitor counts
	producer, err := actorlock.New(client(t, srv.Addr))
	require.NoError(t, err)
	q := producer.DelayedQueue(name)
	// Offered in one order, due in another: delays of a fixed
	// permutation, 2 to 3.25 s out (due after the producer has gone).
	for i := range count {
		delay := 2*time.Second + time.Duration((i*97)%count)*5*time.Millisecond
		require.NoError(t, q.Offer(ctx, fmt.Appendf(nil, "bulk-%03d", i), delay))
	}
	require.NoError(t, producer.Close(ctx))

	// The due order, as Redis has it (member = 17 bytes of header, then
	// the payload), items due at the same ms in the offer order.
	due, err := rdb.ZRangeWithScores(ctx, "redisson_delay_queue_timeout:{"+name+"}", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, due, count)
	offered, err := rdb.LRange(ctx, "redisson_delay_queue:{"+name+"}", 0, -1).Result()
	require.NoError(t, err)
	payloads := func(members []string) []string {
		out := make([]string, len(members))
		for i, m := range members {
			out[i] = m[17:]
		}
		return out
	}
	place := map[string]int{}
	for i, m := range offered {
		place[m] = i
	}
	slices.SortStableFunc(due, func(a, b redis.Z) int {
		return cmp.Or(cmp.Compare(a.Score, b.Score), cmp.Compare(place[a.Member.(string)], place[b.Member.(string)]))
	})
	byDue := make([]string, len(due))
	for i, z := range due {
		byDue[i] = z.Member.(string)
	}
	wantOrder := payloads(byDue)
	require.NotEqual(t, payloads(offered), wantOrder, "offered out of due order")

	// All overdue (by the server's clock), then a runtime opens the queue:
	// its mover finds the backlog.
	last, err := rdb.ZRangeWithScores(ctx, "redisson_delay_queue_timeout:{"+name+"}", -1, -1).Result()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		now, err := rdb.Time(ctx).Result()
		return err == nil && float64(now.UnixMilli()) > last[0].Score
	}, 10*time.Second, 20*time.Millisecond)
	mon := startMonitor(t, srv.Addr)
	rt := newRuntime(t, client(t, srv.Addr))
	consumer := rt.DelayedQueue(name)
	defer consumer.Close()
	require.Eventually(t, func() bool { return rdb.LLen(ctx, name).Val() == count }, 20*time.Second, 10*time.Millisecond)
	got, err := rdb.LRange(ctx, name, 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, wantOrder, got, "moved earliest due first")
	batches := mon.stop(t)
	t.Logf("moved in batches of %v", batches)
	for _, b := range batches {
		assert.LessOrEqual(t, b, 100)
	}
}

// Issue 27 item 4: the read side is locked when the writer also holds a
// read (mode write, the writer's read field beside its write field), as
// Redisson's readLock().isLocked() says; seen from any runtime.
func TestReadLockerIsLockedWhenTheWriterReads(t *testing.T) {
	t.Parallel()
	srv, rdb, rt := setup(t)
	other := newRuntime(t, client(t, srv.Addr))
	ctx := ctxFor(t, 30*time.Second)
	const name = "rw-islocked"
	rw := rt.ReadWriteLock(name)
	isLocked := func(l *actorlock.Lock) bool {
		t.Helper()
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		return locked
	}
	readLocked := func() bool {
		t.Helper()
		mine, theirs := isLocked(rw.ReadLocker()), isLocked(other.ReadWriteLock(name).ReadLocker())
		assert.Equal(t, mine, theirs, "both runtimes read the same")
		return mine
	}

	w, err := rw.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	assert.True(t, isLocked(rw.WriteLocker()))
	assert.False(t, readLocked(), "write only")

	r, err := rw.ReadLocker().Acquire(w.Context()) // the writer reads too
	require.NoError(t, err)
	fields := rdb.HGetAll(ctx, name).Val()
	require.Equal(t, "write", fields["mode"])
	require.Equal(t, "1", fields[w.Owner()], "the writer's read field")
	assert.True(t, readLocked(), "the writer holds a read")
	assert.True(t, isLocked(rw.WriteLocker()))

	require.NoError(t, r.Unlock(ctx))
	assert.False(t, readLocked(), "the writer's read released")
	require.NoError(t, w.Unlock(ctx))
	assert.False(t, readLocked())

	r, err = rw.ReadLocker().Acquire(ctx)
	require.NoError(t, err)
	assert.True(t, readLocked(), "a plain read")
	assert.False(t, isLocked(rw.WriteLocker()))
	require.NoError(t, r.Unlock(ctx))
}

// Issue 27 item 8: 0 permits is a no-op, as in Redisson: tryAcquire(0) is
// true and acquire(0) returns at once, even with no permit available;
// release(0) changes nothing and wakes nobody. The handle's checks still
// apply (a bad name, a closed runtime).
func TestSemaphoreZeroPermitsIsANoOp(t *testing.T) {
	t.Parallel()
	srv, rdb, rt := setup(t)
	ctx := ctxFor(t, 30*time.Second)
	s := rt.Semaphore("sem-zero")
	_, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	ok, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)

	// None available: 0 is still had at once.
	ok, err = s.TryAcquire(ctx, 0)
	require.NoError(t, err)
	assert.True(t, ok, "tryAcquire(0)")
	start := time.Now()
	require.NoError(t, s.Acquire(ctx, 0))
	assert.Less(t, time.Since(start), time.Second, "acquire(0) does not wait")
	assert.Equal(t, "0", rdb.Get(ctx, "sem-zero").Val(), "nothing taken")

	// release(0): no change, no message (a waiter stays waiting).
	waiter := make(chan error, 1)
	go func() { waiter <- s.Acquire(ctx, 1) }()
	sub := client(t, srv.Addr).Subscribe(ctx, "redisson_sc:{sem-zero}")
	defer sub.Close()
	_, err = sub.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, 0))
	assert.Equal(t, "0", rdb.Get(ctx, "sem-zero").Val(), "nothing given back")
	select {
	case msg := <-sub.Channel():
		t.Errorf("release(0) published %v", msg)
	case err := <-waiter:
		t.Errorf("a waiter got a permit after release(0): %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, s.Release(ctx, 1))
	select {
	case <-sub.Channel(): // what release(0) did not send
	case <-time.After(5 * time.Second):
		t.Error("release(1) published nothing on the channel watched")
	}
	require.NoError(t, <-waiter)

	_, err = rt.Semaphore("").TryAcquire(ctx, 0)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, "the name is still checked")
	require.NoError(t, rt.Close(ctx))
	assert.ErrorIs(t, s.Acquire(ctx, 0), actorlock.ErrClosed)
	assert.ErrorIs(t, s.Release(ctx, 0), actorlock.ErrClosed)
}

// The calls a Go caller makes itself (a semaphore's release, a latch's
// count down) are bounded by the call timeout too, with a client at its
// defaults.
func TestCallTimeoutBoundsDirectCalls(t *testing.T) {
	t.Parallel()
	const callTimeout = 1500 * time.Millisecond
	srv, _, rt := setup(t, actorlock.WithCallTimeout(callTimeout))
	ctx := ctxFor(t, 60*time.Second)
	sem, latch := rt.Semaphore("frozen-direct"), rt.CountDownLatch("frozen-latch")
	_, err := sem.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	_, err = latch.TrySetCount(ctx, 5)
	require.NoError(t, err)
	require.NoError(t, sem.Release(ctx, 1))
	require.NoError(t, latch.CountDown(ctx))

	require.NoError(t, srv.Pause())
	defer func() { _ = srv.Resume() }()
	for what, call := range map[string]func() error{
		"Semaphore.Release":        func() error { return sem.Release(context.Background(), 1) },
		"CountDownLatch.CountDown": func() error { return latch.CountDown(context.Background()) },
	} {
		start := time.Now()
		err := call()
		took := time.Since(start)
		t.Logf("%s against a frozen Redis: %v: %v", what, took, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded, what)
		assert.ErrorContains(t, err, "Redis did not answer within the call timeout of 1.5s", what)
		assert.Less(t, took, callTimeout+time.Second, what)
	}
}
