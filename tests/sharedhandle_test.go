package tests

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// locker is what the shared-handle tests need of a Lock, a MultiLock and a
// RedLock: acquire, then a hold with a token (several for a group), a
// context and an Unlock.
type locker interface {
	acquire(ctx context.Context, opts ...actorlock.AcquireOption) (heldLike, error)
	try(ctx context.Context) (heldLike, error)
}

type heldLike interface {
	Unlock(ctx context.Context) error
	Context() context.Context
	Done() <-chan struct{}
}

type lockLocker struct{ l *actorlock.Lock }

func (l lockLocker) acquire(ctx context.Context, opts ...actorlock.AcquireOption) (heldLike, error) {
	h, err := l.l.Acquire(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func (l lockLocker) try(ctx context.Context) (heldLike, error) {
	h, err := l.l.TryAcquire(ctx)
	if err != nil {
		return nil, err
	}
	return h, nil
}

type multiLocker struct{ m *actorlock.Group }

func (m multiLocker) acquire(ctx context.Context, opts ...actorlock.AcquireOption) (heldLike, error) {
	g, err := m.m.Acquire(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (m multiLocker) try(ctx context.Context) (heldLike, error) {
	g, err := m.m.TryAcquire(ctx)
	if err != nil {
		return nil, err
	}
	return g, nil
}

type redLocker struct{ r *actorlock.Group }

func (r redLocker) acquire(ctx context.Context, opts ...actorlock.AcquireOption) (heldLike, error) {
	g, err := r.r.Acquire(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (r redLocker) try(ctx context.Context) (heldLike, error) {
	g, err := r.r.TryAcquire(ctx)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// hammer runs goroutines × rounds of an unprotected read-modify-write of a
// counter on rdb under one shared handle, recording every critical section
// (with owner and token for a single lock). The counter must come out exact
// and no two sections may overlap.
func hammer(t *testing.T, ctx context.Context, rdb redis.UniversalClient, l locker, counter string, goroutines, rounds int) []section {
	t.Helper()
	var rec recorder
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range rounds {
				h, err := l.acquire(ctx)
				if !assert.NoError(t, err) {
					return
				}
				start := time.Now().UnixNano()
				n, err := rdb.Get(ctx, counter).Int()
				if errors.Is(err, redis.Nil) {
					err = nil
				}
				assert.NoError(t, err)
				assert.NoError(t, rdb.Set(ctx, counter, n+1, 0).Err())
				s := section{Proc: g, Start: start, End: time.Now().UnixNano()}
				if one, ok := h.(*actorlock.Held); ok {
					s.Owner, s.Token = one.Owner(), one.Token()
				}
				select {
				case <-h.Done():
					t.Errorf("lost while held: %v", context.Cause(h.Context()))
				default:
				}
				rec.add(s)
				assert.NoError(t, h.Unlock(ctx))
			}
		})
	}
	wg.Wait()
	n, err := rdb.Get(ctx, counter).Int()
	require.NoError(t, err)
	assert.Equal(t, goroutines*rounds, n, "no update lost: the shared handle excluded its goroutines")
	return assertNoOverlap(t, rec.sections)
}

// 32 goroutines share one handle, as they would a sync.Mutex in a struct
// field: they exclude each other, so an unprotected GET/SET counter is
// exact, sections never overlap and fencing tokens rise in section order.
func TestSharedHandleExcludesItsGoroutines(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 3*time.Minute)
	const goroutines, rounds = 32, 200
	sections := hammer(t, ctx, rdb, lockLocker{rt.Lock("shared-handle")}, "shared-counter", goroutines, rounds)
	assertExclusive(t, sections)
	owners := map[string]bool{}
	for _, s := range sections {
		owners[s.Owner] = true
	}
	assert.Len(t, owners, goroutines*rounds, "every acquisition is an owner of its own")
	assert.Zero(t, rdb.Exists(ctx, "shared-handle").Val(), "free after the last unlock")
}

// The same holds for every lock kind that can be shared: the fair lock, the
// write side of a read-write lock, a MultiLock and a RedLock.
func TestSharedHandlesOfEveryKindExclude(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ms := startMasters(t, 3)
	const goroutines, rounds = 8, 25
	for _, c := range []struct {
		name string
		l    locker
		rdb  redis.UniversalClient
	}{
		{"fair lock", lockLocker{rt.FairLock("shared-fair")}, rdb},
		{"write lock", lockLocker{rt.ReadWriteLock("shared-rw").WriteLocker()}, rdb},
		{"MultiLock", multiLocker{actorlock.MultiLock(rt.Lock("shared-m1"), rt.Lock("shared-m2"))}, rdb},
		{"RedLock", redLocker{actorlock.RedLock(ms.locks("shared-red")...)}, ms.rdbs[0]},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t, 2*time.Minute)
			sections := hammer(t, ctx, c.rdb, c.l, "counter:"+c.name, goroutines, rounds)
			if _, single := c.l.(lockLocker); single {
				assertExclusive(t, sections)
			}
		})
	}
}

// An acquisition whose ctx descends from a hold's Context re-enters it (one
// owner, hold count 2, one Unlock each); one with an unrelated ctx, even
// from the goroutine holding the lock, waits like anyone else: never a
// silent re-entry.
func TestReentrancyFollowsTheContext(t *testing.T) {
	t.Parallel()
	eachDeployment(t, func(t *testing.T, d *deployment) {
		rdb, rt := d.setup(t)
		ctx := ctxFor(t, 20*time.Second)
		l := rt.Lock("ctx-reentry")

		h1, err := l.Acquire(ctx)
		require.NoError(t, err)
		type key struct{}
		nested := context.WithValue(h1.Context(), key{}, "derived") // any descendant
		h2, err := l.Acquire(nested)
		require.NoError(t, err, "re-entry through the hold's context")
		assert.Equal(t, h1.Owner(), h2.Owner())
		assert.Equal(t, map[string]string{h1.Owner(): "2"}, ownersOf(rdb.HGetAll(ctx, "ctx-reentry").Val()))
		assert.Equal(t, "derived", h2.Context().Value(key{}), "the nested hold keeps its context's values")

		_, err = l.TryAcquire(ctx)
		assert.ErrorIs(t, err, actorlock.ErrNotAcquired, "an unrelated context is another owner")
		start := time.Now()
		_, err = l.Acquire(ctx, actorlock.WaitTime(time.Second))
		assert.ErrorIs(t, err, actorlock.ErrNotAcquired, "it waited, and did not re-enter")
		assert.GreaterOrEqual(t, time.Since(start), time.Second)
		assert.Equal(t, map[string]string{h1.Owner(): "2"}, ownersOf(rdb.HGetAll(ctx, "ctx-reentry").Val()), "nothing re-entered")

		require.NoError(t, h2.Unlock(ctx))
		assert.Equal(t, map[string]string{h1.Owner(): "1"}, ownersOf(rdb.HGetAll(ctx, "ctx-reentry").Val()))
		require.NoError(t, h1.Unlock(ctx))
		assert.Zero(t, rdb.Exists(ctx, "ctx-reentry").Val())

		// A waiter with an unrelated context gets the lock once it is free.
		h3, err := l.Acquire(ctx)
		require.NoError(t, err)
		w := make(chan *actorlock.Held, 1)
		go func() {
			h, err := l.Acquire(ctx, actorlock.WaitTime(10*time.Second))
			assert.NoError(t, err)
			w <- h
		}()
		time.Sleep(200 * time.Millisecond)
		select {
		case <-w:
			t.Fatal("a second acquisition through the handle must wait for the first")
		default:
		}
		require.NoError(t, h3.Unlock(ctx))
		h4 := <-w
		require.NotNil(t, h4)
		assert.NotEqual(t, h3.Owner(), h4.Owner())
		require.NoError(t, h4.Unlock(ctx))
	})
}

// A MultiLock or RedLock acquired again with its GroupHeld's context
// re-enters every member; so does a member lock alone.
func TestGroupReentrancyFollowsTheContext(t *testing.T) {
	t.Parallel()
	ms := startMasters(t, 3)
	ctx := ctxFor(t, 20*time.Second)
	for _, c := range []struct {
		name  string
		group func(locks []*actorlock.Lock) locker
	}{
		{"MultiLock", func(l []*actorlock.Lock) locker { return multiLocker{actorlock.MultiLock(l...)} }},
		{"RedLock", func(l []*actorlock.Lock) locker { return redLocker{actorlock.RedLock(l...)} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "group-reentry-" + c.name
			locks := ms.locks(name)
			g := c.group(locks)
			outer, err := g.acquire(ctx)
			require.NoError(t, err)
			inner, err := g.try(outer.Context())
			require.NoError(t, err, "re-entry through the group's context")
			member, err := locks[0].TryAcquire(outer.Context())
			require.NoError(t, err, "a member re-enters too")
			assert.Equal(t, "3", firstField(t, ctx, ms.rdbs[0], name))
			for _, rdb := range ms.rdbs[1:] {
				assert.Equal(t, "2", firstField(t, ctx, rdb, name))
			}
			_, err = g.try(ctx)
			assert.ErrorIs(t, err, actorlock.ErrNotAcquired, "an unrelated context is another owner")

			require.NoError(t, member.Unlock(ctx))
			require.NoError(t, inner.Unlock(ctx))
			for _, rdb := range ms.rdbs {
				assert.Equal(t, "1", firstField(t, ctx, rdb, name))
			}
			require.NoError(t, outer.Unlock(ctx))
			for i, rdb := range ms.rdbs {
				assert.Zero(t, rdb.Exists(ctx, name).Val(), "server %d", i)
			}
		})
	}
}

// firstField is the hold count of the lock's only owner.
func firstField(t *testing.T, ctx context.Context, rdb *redis.Client, name string) string {
	t.Helper()
	fields, err := rdb.HGetAll(ctx, name).Result()
	require.NoError(t, err)
	fields = ownersOf(fields)
	require.Len(t, fields, 1, "one owner")
	for _, v := range fields {
		return v
	}
	return ""
}

// Goroutines re-entering through a hold's context share its owner; the
// read side taken with a write hold's context is a downgrade, while the
// write side asked for with a read hold's context is an upgrade, refused.
func TestReadWriteReentrancyFollowsTheContext(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	ctx := ctxFor(t, 20*time.Second)
	rw := rt.ReadWriteLock("rw-ctx")
	w, err := rw.WriteLocker().Acquire(ctx)
	require.NoError(t, err)
	r, err := rw.ReadLocker().TryAcquire(w.Context())
	require.NoError(t, err, "the writer's context may read")
	_, err = rw.ReadLocker().TryAcquire(ctx)
	assert.ErrorIs(t, err, actorlock.ErrNotAcquired, "another owner may not read while it writes")
	require.NoError(t, w.Unlock(ctx))
	require.NoError(t, r.Unlock(ctx))

	r1, err := rw.ReadLocker().Acquire(ctx)
	require.NoError(t, err)
	r2, err := rw.ReadLocker().Acquire(ctx)
	require.NoError(t, err, "readers share")
	assert.NotEqual(t, r1.Owner(), r2.Owner())
	_, err = rw.WriteLocker().TryAcquire(r1.Context())
	assert.ErrorIs(t, err, actorlock.ErrUpgrade)
	n, err := rw.ReadLocker().HoldCount(r1.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, r1.Unlock(ctx))
	require.NoError(t, r2.Unlock(ctx))
	assert.Zero(t, rdb.Exists(ctx, "rw-ctx").Val())
}
