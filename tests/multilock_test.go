package tests

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// cluster of independent Redis servers, one runtime each.
type masters struct {
	srvs []*redisserver.Server
	rdbs []*redis.Client
	rts  []*actorlock.Runtime
}

func startMasters(t *testing.T, n int, opts ...actorlock.Option) *masters {
	t.Helper()
	m := &masters{}
	for range n {
		srv := startRedis(t)
		rdb := client(t, srv.Addr)
		m.srvs = append(m.srvs, srv)
		m.rdbs = append(m.rdbs, rdb)
		m.rts = append(m.rts, newRuntime(t, rdb, opts...))
	}
	return m
}

// locks returns a new handle (a new owner) on name on every server.
func (m *masters) locks(name string) []*actorlock.Lock {
	var out []*actorlock.Lock
	for _, rt := range m.rts {
		out = append(out, rt.Lock(name))
	}
	return out
}

// 10 goroutines race for the same three locks: exactly one holds them all.
func TestMultiLockRaceHasOneWinner(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	ctx := ctxFor(t, 10*time.Second)
	var winners atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := actorlock.MultiLock(rt.Lock("m:a"), rt.Lock("m:b"), rt.Lock("m:c"))
			<-start
			g, err := m.TryAcquire(ctx)
			if err == nil {
				winners.Add(1)
				time.Sleep(200 * time.Millisecond) // hold while the others try
				assert.NoError(t, g.Unlock(ctx))
				return
			}
			assert.ErrorIs(t, err, actorlock.ErrNotAcquired)
		}()
	}
	close(start)
	wg.Wait()
	assert.EqualValues(t, 1, winners.Load())
	for _, name := range []string{"m:a", "m:b", "m:c"} {
		locked, err := rt.Lock(name).IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked, "%s released", name)
	}
}

// One member held elsewhere: the MultiLock fails and holds nothing.
func TestMultiLockIsAllOrNothing(t *testing.T) {
	t.Parallel()
	ms := startMasters(t, 3)
	ctx := ctxFor(t, 10*time.Second)
	l := []*actorlock.Lock{ms.rts[0].Lock("x1"), ms.rts[1].Lock("x2"), ms.rts[2].Lock("x3")}
	other, err := ms.rts[1].Lock("x2").Acquire(ctx)
	require.NoError(t, err)

	_, err = actorlock.MultiLock(l...).TryAcquire(ctx)
	require.ErrorIs(t, err, actorlock.ErrNotAcquired)
	start := time.Now()
	_, err = actorlock.MultiLock(l...).Acquire(ctx, actorlock.WaitTime(300*time.Millisecond))
	require.ErrorIs(t, err, actorlock.ErrNotAcquired)
	assert.Less(t, time.Since(start), 500*time.Millisecond, "within its wait time")
	for i, lock := range []*actorlock.Lock{l[0], l[2]} {
		locked, err := lock.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked, "member %d was released", i)
	}
	require.NoError(t, other.Unlock(ctx))

	// Members on three servers, held together.
	g, err := actorlock.MultiLock(l...).Acquire(ctx, actorlock.WaitTime(time.Second))
	require.NoError(t, err)
	for i, rdb := range ms.rdbs {
		assert.EqualValues(t, 1, rdb.Exists(ctx, fmt.Sprintf("x%d", i+1)).Val())
	}
	assert.Len(t, g.Members(), 3)
	require.NoError(t, g.Unlock(ctx))
	for i, rdb := range ms.rdbs {
		assert.Zero(t, rdb.Exists(ctx, fmt.Sprintf("x%d", i+1)).Val())
	}
	assert.ErrorIs(t, g.Unlock(ctx), actorlock.ErrUnlocked)
}

// MultiLocks over {a, b} and {b, a} contend for 10 s: the global order
// keeps them from deadlocking (a deadlock would time their waits out).
func TestMultiLocksInOppositeOrdersNeverDeadlock(t *testing.T) {
	t.Parallel()
	ms := startMasters(t, 2)
	ctx := ctxFor(t, 30*time.Second)
	end := time.Now().Add(10 * time.Second)
	var rounds [2]atomic.Int64
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b := ms.rts[0].Lock("dl:a"), ms.rts[1].Lock("dl:b")
			m := actorlock.MultiLock(a, b)
			if i%2 == 1 {
				m = actorlock.MultiLock(b, a)
			}
			for time.Now().Before(end) {
				g, err := m.Acquire(ctx, actorlock.WaitTime(5*time.Second))
				if !assert.NoError(t, err, "a MultiLock waited 5 s: deadlock?") {
					return
				}
				time.Sleep(time.Millisecond)
				if !assert.NoError(t, g.Unlock(ctx)) {
					return
				}
				rounds[i%2].Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("acquisitions: {a,b} %d, {b,a} %d", rounds[0].Load(), rounds[1].Load())
	assert.Positive(t, rounds[0].Load())
	assert.Positive(t, rounds[1].Load())
}

// Done closes when any member is lost; Unlock still releases the others and
// reports the lost one.
func TestMultiLockLostMemberAndUnlockErrors(t *testing.T) {
	t.Parallel()
	ms := startMasters(t, 3, actorlock.WithWatchdog(900*time.Millisecond))
	ctx := ctxFor(t, 10*time.Second)
	g, err := actorlock.MultiLock(ms.rts[0].Lock("y1"), ms.rts[1].Lock("y2"), ms.rts[2].Lock("y3")).Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, ms.rdbs[1].Del(ctx, "y2").Err())
	select {
	case <-g.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done did not close when a member was lost")
	}
	require.ErrorIs(t, g.Err(), actorlock.ErrLost)
	err = g.Unlock(ctx)
	require.ErrorIs(t, err, actorlock.ErrLost, "the lost member is reported")
	assert.Contains(t, err.Error(), "y2")
	assert.Zero(t, ms.rdbs[0].Exists(ctx, "y1").Val(), "the others are released all the same")
	assert.Zero(t, ms.rdbs[2].Exists(ctx, "y3").Val())
}

func TestMultiLockBadInput(t *testing.T) {
	t.Parallel()
	_, _, rt := setup(t)
	ctx := ctxFor(t, 5*time.Second)
	for _, m := range []*actorlock.Group{
		actorlock.MultiLock(),
		actorlock.MultiLock(rt.Lock("a"), nil),
		actorlock.MultiLock(rt.Lock("")),
	} {
		_, err := m.Acquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	}
	a := rt.Lock("dup")
	_, err := actorlock.MultiLock(a, a).TryAcquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, "the same lock twice")
	_, err = actorlock.MultiLock(a).TryAcquire(ctx, actorlock.WaitTime(time.Second))
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument)
	_, err = actorlock.RedLock(rt.Lock("r1"), rt.Lock("r2")).TryAcquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, "two RedLock members on one server")
	assert.False(t, errors.Is(err, actorlock.ErrNotAcquired))
}
