package tests

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// The members of a MultiLock or RedLock are identified, ordered and told
// apart by their Redis deployment, never by their runtime: two runtimes
// may share a server, and every process orders the members alike.

// Two runtimes on one server do not make two RedLock masters: a majority
// of {r1, r2, r3} would then come from one server.
func TestRedLockRefusesTwoMembersOnOneServerFromTwoRuntimes(t *testing.T) {
	t.Parallel()
	one, other := startRedis(t), startRedis(t)
	rtA := newRuntime(t, client(t, one.Addr))
	rtB := newRuntime(t, client(t, one.Addr))
	rtC := newRuntime(t, client(t, other.Addr))
	ctx := ctxFor(t, 10*time.Second)
	g, err := actorlock.RedLock(rtA.Lock("r1"), rtB.Lock("r2"), rtC.Lock("r3")).TryAcquire(ctx)
	if err == nil {
		_ = g.Unlock(ctx)
	}
	require.ErrorIs(t, err, actorlock.ErrInvalidArgument, "two members on one server")
	assert.Contains(t, err.Error(), one.Addr)
	assert.Zero(t, client(t, one.Addr).Exists(ctx, "r1", "r2").Val(), "nothing was tried")

	// Distinct servers are fine, one runtime each or not.
	g, err = actorlock.RedLock(rtA.Lock("r1"), rtC.Lock("r3")).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Unlock(ctx))
}

// One lock reached through two runtimes on one server is one member given
// twice, as is a lock and a fair lock of one name (one Redis key): acquired
// by two owners, the group would wait for itself until its wait time ran out.
func TestMultiLockCatchesOneLockThroughTwoRuntimes(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rtA := newRuntime(t, client(t, srv.Addr))
	rtB := newRuntime(t, client(t, srv.Addr))
	prefixed := newRuntime(t, client(t, srv.Addr), actorlock.WithKeyPrefix("app:"))
	ctx := ctxFor(t, 10*time.Second)
	for _, c := range []struct {
		what string
		m    *actorlock.Group
	}{
		{"one name, two runtimes", actorlock.MultiLock(rtA.Lock("x"), rtB.Lock("x"))},
		{"one key, two prefixes", actorlock.MultiLock(prefixed.Lock("x"), rtB.Lock("app:x"))},
		{"a lock and a fair lock of one name", actorlock.MultiLock(rtA.Lock("y"), rtB.FairLock("y"))},
		{"both sides of a read-write lock", actorlock.MultiLock(rtA.ReadWriteLock("z").ReadLocker(), rtB.ReadWriteLock("z").WriteLocker())},
	} {
		start := time.Now()
		g, err := c.m.Acquire(ctx, actorlock.WaitTime(2*time.Second))
		if err == nil {
			_ = g.Unlock(ctx)
		}
		assert.ErrorIs(t, err, actorlock.ErrInvalidArgument, c.what)
		assert.Contains(t, err.Error(), "given twice", c.what)
		assert.Less(t, time.Since(start), time.Second, "%s: refused at once, not waited for", c.what)
	}
	// One name on two servers, or in two databases, is two locks.
	other := startRedis(t)
	rtC := newRuntime(t, client(t, other.Addr))
	db1 := redis.NewClient(&redis.Options{Addr: srv.Addr, DB: 1})
	t.Cleanup(func() { _ = db1.Close() })
	rtD := newRuntime(t, db1)
	g, err := actorlock.MultiLock(rtA.Lock("x"), rtC.Lock("x"), rtD.Lock("x")).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Unlock(ctx))
}

// sentinelDeployment is a master watched by a Sentinel as name, and a
// failover client factory for it.
func sentinelDeployment(t *testing.T, name string) func() redis.UniversalClient {
	t.Helper()
	master := startRedis(t)
	sentinel, err := redisserver.StartSentinel(master, name, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sentinel.Close() })
	return func() redis.UniversalClient {
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: name, SentinelAddrs: []string{sentinel.Addr}})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

// A Sentinel client's runtime has no name every process gives it alike
// (its runtime id differs in every process, which ordered members by it):
// a group mixing it with another runtime is refused until the deployment is
// named, rather than acquired in an order another process may reverse.
func TestMultiLockAcrossSentinelRuntimesNeedsAServerName(t *testing.T) {
	t.Parallel()
	failover := sentinelDeployment(t, "locks")
	plain := newRuntime(t, client(t, startRedis(t).Addr))
	unnamed := newRuntime(t, failover())
	ctx := ctxFor(t, 30*time.Second)
	for _, m := range []*actorlock.Group{
		actorlock.MultiLock(unnamed.Lock("x"), plain.Lock("y")),
		actorlock.MultiLock(plain.Lock("y"), unnamed.Lock("x")),
	} {
		g, err := m.TryAcquire(ctx)
		if err == nil {
			_ = g.Unlock(ctx)
		}
		require.ErrorIs(t, err, actorlock.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "WithServerName")
	}
	_, err := actorlock.RedLock(unnamed.Lock("x"), plain.Lock("x")).TryAcquire(ctx)
	require.ErrorIs(t, err, actorlock.ErrInvalidArgument)

	// Alone, its members need no name: their order is by name.
	g, err := actorlock.MultiLock(unnamed.Lock("x"), unnamed.Lock("y")).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Unlock(ctx))
	// Named, it joins groups.
	named := newRuntime(t, failover(), actorlock.WithServerName("locks"))
	g, err = actorlock.MultiLock(named.Lock("x"), plain.Lock("y")).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Unlock(ctx))
}

// Two processes (pairs of runtimes here) take MultiLock {x on Sentinel
// deployment a, y on Sentinel deployment b} while a third owner holds both;
// when it lets go of both at once, a process whose order starts with x and
// one whose order starts with y would each take its first member and wait
// for the other's until their wait time ran out. Named alike, every process
// orders them alike. (Ordered by runtime ids, as they were, three processes
// agree in one round of four.)
func TestMultiLockOrderIsOneAcrossProcessesOnSentinel(t *testing.T) {
	t.Parallel()
	deployA, deployB := sentinelDeployment(t, "a"), sentinelDeployment(t, "b")
	ctx := ctxFor(t, 90*time.Second)
	type process struct{ a, b *actorlock.Runtime }
	procs := make([]process, 4)
	for i := range procs {
		procs[i] = process{
			a: newRuntime(t, deployA(), actorlock.WithServerName("a")),
			b: newRuntime(t, deployB(), actorlock.WithServerName("b")),
		}
	}
	third := procs[0]
	for round := range 3 {
		x, err := third.a.Lock("x").Acquire(ctx)
		require.NoError(t, err)
		y, err := third.b.Lock("y").Acquire(ctx)
		require.NoError(t, err)
		results := make(chan error, len(procs)-1)
		for i, p := range procs[1:] {
			m := actorlock.MultiLock(p.a.Lock("x"), p.b.Lock("y"))
			if i%2 == 1 {
				m = actorlock.MultiLock(p.b.Lock("y"), p.a.Lock("x"))
			}
			go func() {
				g, err := m.Acquire(ctx, actorlock.WaitTime(10*time.Second))
				if err == nil {
					time.Sleep(10 * time.Millisecond)
					err = g.Unlock(context.WithoutCancel(ctx))
				}
				results <- err
			}()
		}
		// Each process waits at its first member (or queues behind one that does).
		time.Sleep(500 * time.Millisecond)
		done := make(chan error, 2)
		go func() { done <- x.Unlock(ctx) }()
		go func() { done <- y.Unlock(ctx) }()
		require.NoError(t, <-done)
		require.NoError(t, <-done)
		for range len(procs) - 1 {
			assert.NoError(t, await(t, results, 30*time.Second, "a MultiLock"), "round %d: deadlock?", round)
		}
	}
}
