package tests

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// runPrimitives exercises every primitive through two runtimes (on clients
// from dial), names prefixed with p: reentrant, fair and read-write locks
// with pub/sub wake-ups across runtimes, fencing tokens, watchdog renewal,
// force unlocks, delayed and blocking queues, semaphores and the count-down
// latch, one subtest each. admin only observes. opts configure every runtime.
func runPrimitives(t *testing.T, dial func() *redis.Client, admin *redis.Client, p string, opts ...actorlock.Option) {
	e := primitivesEnv{rtA: newRuntime(t, dial(), opts...), rtB: newRuntime(t, dial(), opts...), dial: dial, admin: admin, p: p, opts: opts}
	// The parts run at once, each a subtest, within this test's slot of
	// -parallel (they mostly wait).
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, part := range []struct {
		name string
		run  func(*testing.T, primitivesEnv)
	}{
		{"reentrant lock, fencing, wake-up", primReentrantLock},
		{"watchdog renewal", primWatchdog},
		{"fair lock", primFairLock},
		{"read-write lock", primReadWriteLock},
		{"delayed and blocking queues", primQueues},
		{"semaphores", primSemaphores},
		{"count-down latch", primLatch},
	} {
		wg.Go(func() { t.Run(part.name, func(t *testing.T) { part.run(t, e) }) })
	}
}

// primitivesEnv is what the parts of runPrimitives share.
type primitivesEnv struct {
	rtA, rtB *actorlock.Runtime // two runtimes on clients from dial
	dial     func() *redis.Client
	admin    *redis.Client // only observes
	p        string        // every name's prefix
	opts     []actorlock.Option
}

// primReentrantLock: runPrimitives' part "reentrant lock, fencing, wake-up".
func primReentrantLock(t *testing.T, e primitivesEnv) {
	rtA, rtB, admin, p := e.rtA, e.rtB, e.admin, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "lock"
	a := rtA.Lock(name)
	// A fencing counter ahead of the server clock (as RFencedLock's
	// INCRs on top of ours leave it) is counted on by INCR.
	require.NoError(t, admin.Set(ctx, tokenKey(a.Name()), "9000000000000000", 0).Err())
	h1, err := a.Acquire(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 9000000000000001, h1.Token())
	h2, err := a.Acquire(h1.Context())
	require.NoError(t, err)
	assert.Greater(t, h2.Token(), h1.Token(), "fencing tokens increase")
	n, err := a.HoldCount(h1.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	locked, err := a.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)
	ttl, err := a.RemainTTL(ctx)
	require.NoError(t, err)
	assert.Positive(t, ttl)
	_, err = rtB.Lock(name).TryAcquire(ctx)
	require.ErrorIs(t, err, actorlock.ErrNotAcquired)

	// A waiter in the other runtime is woken by the unlock message,
	// long before the 30 s lease would have let it in.
	got := make(chan *actorlock.Held, 1)
	go func() {
		h, err := rtB.Lock(name).Acquire(ctx, actorlock.WaitTime(10*time.Second))
		assert.NoError(t, err)
		got <- h
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, h2.Unlock(ctx))
	unlocked := time.Now()
	require.NoError(t, h1.Unlock(ctx))
	h3 := <-got
	require.NotNil(t, h3)
	assert.Less(t, time.Since(unlocked), 2*time.Second, "woken by pub/sub")
	assert.Greater(t, h3.Token(), h2.Token())
	require.NoError(t, h3.Unlock(ctx))

	h4, err := a.Acquire(ctx)
	require.NoError(t, err)
	was, err := a.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, was)
	select {
	case <-h4.Done():
		assert.ErrorIs(t, h4.Err(), actorlock.ErrLost)
	case <-time.After(5 * time.Second):
		t.Error("a force-unlocked hold is not lost")
	}
}

// primWatchdog: runPrimitives' part "watchdog renewal".
func primWatchdog(t *testing.T, e primitivesEnv) {
	dial, opts, p := e.dial, e.opts, e.p
	ctx := ctxFor(t, 20*time.Second)
	// The parts run side by side over TLS under the race detector: a lease
	// of well under a second is lost to a slow renewal, not to a fault.
	const lease = 2 * time.Second
	rt := newRuntime(t, dial(), append(opts, actorlock.WithWatchdog(lease))...)
	h, err := rt.Lock(p + "watched").Acquire(ctx)
	require.NoError(t, err)
	rw := rt.ReadWriteLock(p + "watched-rw")
	r, err := rw.ReadLocker().Acquire(ctx)
	require.NoError(t, err)
	time.Sleep(lease * 5 / 2) // renewed, or lost by now
	for _, held := range []*actorlock.Held{h, r} {
		select {
		case <-held.Done():
			t.Fatalf("%s lost: %v", held.Name(), held.Err())
		default:
		}
		require.NoError(t, held.Unlock(ctx))
	}
}

// primFairLock: runPrimitives' part "fair lock".
func primFairLock(t *testing.T, e primitivesEnv) {
	rtA, rtB, admin, p := e.rtA, e.rtB, e.admin, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "fair"
	h, err := rtA.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	queue, _ := fairKeys(rtA.FairLock(name).Name()) // the Redis name (WithKeyPrefix)
	queued := func(l *actorlock.Lock) bool { return admin.LPos(ctx, queue, l.Owner(), redis.LPosArgs{}).Err() == nil }
	wait := func(who string, rt *actorlock.Runtime, w time.Duration) *actorlock.Lock {
		l := rt.FairLock(name, actorlock.WithOwner(rt.ID()+":"+who))
		wg.Go(func() {
			h, err := l.Acquire(ctx, actorlock.WaitTime(w))
			if who == "quitter" {
				assert.ErrorIs(t, err, actorlock.ErrNotAcquired)
				return
			}
			if assert.NoError(t, err, who) {
				mu.Lock()
				order = append(order, who)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				assert.NoError(t, h.Unlock(ctx))
			}
		})
		require.Eventually(t, func() bool { return queued(l) }, 5*time.Second, 2*time.Millisecond, "%s joins the queue", who)
		return l
	}
	wait("first", rtB, 10*time.Second)
	quitter := wait("quitter", rtB, 300*time.Millisecond)
	wait("second", rtA, 10*time.Second)
	wait("third", rtB, 10*time.Second)
	require.Eventually(t, func() bool { return !queued(quitter) }, 5*time.Second, 2*time.Millisecond, "the quitter leaves the queue")
	require.NoError(t, h.Unlock(ctx))
	wg.Wait()
	assert.Equal(t, []string{"first", "second", "third"}, order)
	_, err = rtA.FairLock(name).Acquire(ctx)
	require.NoError(t, err)
	was, err := rtB.FairLock(name).ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, was)
}

// primReadWriteLock: runPrimitives' part "read-write lock".
func primReadWriteLock(t *testing.T, e primitivesEnv) {
	rtA, rtB, p := e.rtA, e.rtB, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "rw"
	writer := rtA.ReadWriteLock(name)
	w, err := writer.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	readers := []*actorlock.ReadWriteLock{rtB.ReadWriteLock(name), rtA.ReadWriteLock(name)}
	held := make([]*actorlock.Held, len(readers))
	var waiting sync.WaitGroup
	for i, rw := range readers {
		waiting.Go(func() {
			h, err := rw.ReadLocker().Acquire(ctx, actorlock.WaitTime(10*time.Second))
			assert.NoError(t, err)
			held[i] = h
		})
	}
	time.Sleep(200 * time.Millisecond)
	for i := range held {
		assert.Nil(t, held[i], "readers wait for the writer")
	}
	require.NoError(t, w.Unlock(ctx))
	waiting.Wait()
	r1, r2 := held[0], held[1]
	require.NotNil(t, r1)
	require.NotNil(t, r2)
	_, err = readers[0].WriteLocker().TryAcquire(r1.Context())
	assert.ErrorIs(t, err, actorlock.ErrUpgrade)
	require.NoError(t, r1.Unlock(ctx)) // the other reader still holds
	require.NoError(t, r2.Unlock(ctx))

	// Downgrade: the writer reads too, then releases the write.
	w, err = writer.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	r, err := writer.ReadLocker().Acquire(w.Context())
	require.NoError(t, err)
	require.NoError(t, w.Unlock(ctx))
	locked, err := writer.ReadLocker().IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked, "still read-locked after the downgrade")
	require.NoError(t, r.Unlock(ctx))

	_, err = writer.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	was, err := rtB.ReadWriteLock(name).WriteLocker().ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, was)
}

// primQueues: runPrimitives' part "delayed and blocking queues".
func primQueues(t *testing.T, e primitivesEnv) {
	rtA, rtB, admin, p := e.rtA, e.rtB, e.admin, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "jobs"
	dq := rtA.DelayedQueue(name)
	t.Cleanup(func() { _ = dq.Close() })
	bq := rtB.BlockingQueue(name)
	taken := make(chan string, 1)
	go func() {
		v, err := bq.Take(ctx)
		assert.NoError(t, err)
		taken <- string(v)
	}()
	require.NoError(t, dq.Offer(ctx, []byte("soon"), 200*time.Millisecond))
	require.NoError(t, dq.Offer(ctx, []byte("later"), time.Hour))
	n, err := dq.Len(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	select {
	case v := <-taken:
		assert.Equal(t, "soon", v)
	case <-time.After(5 * time.Second):
		t.Fatal("the delayed item never arrived")
	}
	has, err := dq.Contains(ctx, []byte("later"))
	require.NoError(t, err)
	assert.True(t, has)
	removed, err := dq.Remove(ctx, []byte("later"))
	require.NoError(t, err)
	assert.True(t, removed)
	require.NoError(t, dq.Offer(ctx, []byte("polled"), time.Hour))
	v, ok, err := dq.Poll(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "polled", string(v))
	require.NoError(t, dq.Offer(ctx, []byte("cleared"), time.Hour))
	require.NoError(t, dq.Clear(ctx))

	require.NoError(t, bq.Offer(ctx, []byte("x")))
	n, err = bq.Len(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	v, ok, err = bq.Poll(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "x", string(v))

	// A Take cancelled while its blocking pop runs: the item that
	// pop then gets is given back to the head of the list.
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := bq.Take(tctx); done <- err }()
	waitBlockedClient(t, ctx, admin)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, rtA.BlockingQueue(name).Offer(ctx, []byte("given back")))
	require.Eventually(t, func() bool {
		v, ok, err := rtA.BlockingQueue(name).Poll(ctx)
		return err == nil && ok && string(v) == "given back"
	}, 5*time.Second, 50*time.Millisecond)
}

// primSemaphores: runPrimitives' part "semaphores".
func primSemaphores(t *testing.T, e primitivesEnv) {
	rtA, rtB, p := e.rtA, e.rtB, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "sem"
	s := rtA.Semaphore(name)
	set, err := s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.True(t, set)
	got := make(chan error, 1)
	go func() { got <- rtB.Semaphore(name).Acquire(ctx, 2) }()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, s.AddPermits(ctx, 1))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	require.NoError(t, s.Release(ctx, 2))
	ok, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	assert.True(t, ok)
	n, err := s.Drain(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	n, err = s.Available(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)

	ps := rtA.PermitExpirableSemaphore(name + "-expirable")
	_, err = ps.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	id1, err := ps.Acquire(ctx, 200*time.Millisecond)
	require.NoError(t, err)
	id2, err := rtB.PermitExpirableSemaphore(name+"-expirable").Acquire(ctx, 0) // once id1 expires
	require.NoError(t, err)
	assert.ErrorIs(t, ps.Release(ctx, id1), actorlock.ErrPermitExpired)
	require.NoError(t, ps.Release(ctx, id2))
	n, err = ps.Available(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
}

// primLatch: runPrimitives' part "count-down latch".
func primLatch(t *testing.T, e primitivesEnv) {
	rtA, rtB, p := e.rtA, e.rtB, e.p
	ctx := ctxFor(t, 20*time.Second)
	name := p + "latch"
	l := rtA.CountDownLatch(name)
	ok, err := l.TrySetCount(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	done := make(chan error, 1)
	go func() { done <- rtB.CountDownLatch(name).Await(ctx) }()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, l.CountDown(ctx))
	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	require.NoError(t, l.CountDown(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Await did not return")
	}
	ok, err = l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	deleted, err := l.Delete(ctx)
	require.NoError(t, err)
	assert.True(t, deleted)
}
