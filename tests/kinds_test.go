package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// A kind of primitive, as the kinds table test uses it: how to make a name
// hold one, and the calls of its handle that touch the name.
type kindCase struct {
	name string
	// is: what ErrWrongKind says the handle is ("not a semaphore"), and
	// what a name holding this kind is said to hold.
	is, holds string
	// layout groups the kinds the Redis layout cannot tell apart: they
	// share a name without ErrWrongKind.
	layout string
	hold   func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, rdb *redis.Client, name string) (release func())
	calls  map[string]func(ctx context.Context, rt *actorlock.Runtime, name string) error
}

// A call that may wait is given this long; refused, it must return at once.
const kindCallWait = 2 * time.Second

func lockCalls(of func(rt *actorlock.Runtime, name string) *actorlock.Lock) map[string]func(context.Context, *actorlock.Runtime, string) error {
	return map[string]func(context.Context, *actorlock.Runtime, string) error{
		"TryAcquire": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
			return unlockIfHeld(of(rt, n).TryAcquire(ctx))
		},
		"Acquire": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
			return unlockIfHeld(of(rt, n).Acquire(ctx, actorlock.WaitTime(kindCallWait)))
		},
	}
}

func unlockIfHeld(h *actorlock.Held, err error) error {
	if err == nil {
		return h.Unlock(context.Background())
	}
	return err
}

func kindCases() []kindCase {
	holdLock := func(of func(rt *actorlock.Runtime, name string) *actorlock.Lock) func(*testing.T, context.Context, *actorlock.Runtime, *redis.Client, string) func() {
		return func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, _ *redis.Client, name string) func() {
			h, err := of(rt, name).Acquire(ctx)
			require.NoError(t, err)
			return func() { _ = h.Unlock(context.Background()) }
		}
	}
	plain := func(rt *actorlock.Runtime, n string) *actorlock.Lock { return rt.Lock(n) }
	fair := func(rt *actorlock.Runtime, n string) *actorlock.Lock { return rt.FairLock(n) }
	write := func(rt *actorlock.Runtime, n string) *actorlock.Lock { return rt.ReadWriteLock(n).WriteLocker() }
	read := func(rt *actorlock.Runtime, n string) *actorlock.Lock { return rt.ReadWriteLock(n).ReadLocker() }
	rwCalls := lockCalls(write)
	for k, v := range lockCalls(read) {
		rwCalls["read "+k] = v
	}
	none := func() {}
	return []kindCase{
		{name: "lock", is: "a lock", holds: "a lock or fair lock", layout: "hash", hold: holdLock(plain), calls: lockCalls(plain)},
		{name: "fair-lock", is: "a fair lock", holds: "a lock or fair lock", layout: "hash", hold: holdLock(fair), calls: lockCalls(fair)},
		{name: "read-write-lock", is: "a read-write lock", holds: "a read-write lock", layout: "rw", hold: holdLock(write), calls: rwCalls},
		{
			name: "semaphore", is: "a semaphore", holds: "a semaphore or count-down latch", layout: "string",
			hold: func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, _ *redis.Client, n string) func() {
				ok, err := rt.Semaphore(n).TrySetPermits(ctx, 5)
				require.NoError(t, err)
				require.True(t, ok)
				return none
			},
			calls: map[string]func(context.Context, *actorlock.Runtime, string) error{
				"TrySetPermits": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.Semaphore(n).TrySetPermits(ctx, 1)
					return err
				},
				"AddPermits": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					return rt.Semaphore(n).AddPermits(ctx, 1)
				},
				"Acquire": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					return rt.Semaphore(n).Acquire(ctx, 1)
				},
				"TryAcquire": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.Semaphore(n).TryAcquire(ctx, 1)
					return err
				},
				"Release": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					return rt.Semaphore(n).Release(ctx, 1)
				},
				"Available": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.Semaphore(n).Available(ctx)
					return err
				},
				"Drain": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.Semaphore(n).Drain(ctx)
					return err
				},
			},
		},
		{
			name: "permit-expirable-semaphore", is: "a permit-expirable semaphore", holds: "a semaphore or count-down latch", layout: "string",
			hold: func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, _ *redis.Client, n string) func() {
				s := rt.PermitExpirableSemaphore(n)
				_, err := s.TrySetPermits(ctx, 5)
				require.NoError(t, err)
				_, err = s.Acquire(ctx, time.Minute) // its permit ZSET too
				require.NoError(t, err)
				return none
			},
			calls: map[string]func(context.Context, *actorlock.Runtime, string) error{
				"TrySetPermits": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.PermitExpirableSemaphore(n).TrySetPermits(ctx, 1)
					return err
				},
				"Acquire": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.PermitExpirableSemaphore(n).Acquire(ctx, time.Minute)
					return err
				},
				"TryAcquire": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, _, err := rt.PermitExpirableSemaphore(n).TryAcquire(ctx, time.Minute)
					return err
				},
				"Available": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.PermitExpirableSemaphore(n).Available(ctx)
					return err
				},
				"Release": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					return rt.PermitExpirableSemaphore(n).Release(ctx, "0123456789abcdef0123456789abcdef")
				},
				"UpdateLeaseTime": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					return rt.PermitExpirableSemaphore(n).UpdateLeaseTime(ctx, "0123456789abcdef0123456789abcdef", time.Minute)
				},
			},
		},
		{
			name: "count-down-latch", is: "a count-down latch", holds: "a semaphore or count-down latch", layout: "string",
			hold: func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, _ *redis.Client, n string) func() {
				ok, err := rt.CountDownLatch(n).TrySetCount(ctx, 3)
				require.NoError(t, err)
				require.True(t, ok)
				return none
			},
			calls: map[string]func(context.Context, *actorlock.Runtime, string) error{
				"TrySetCount": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.CountDownLatch(n).TrySetCount(ctx, 1)
					return err
				},
				"CountDown": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					return rt.CountDownLatch(n).CountDown(ctx)
				},
				"Count": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.CountDownLatch(n).Count(ctx)
					return err
				},
				"Await": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					return rt.CountDownLatch(n).Await(ctx)
				},
				"Delete": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.CountDownLatch(n).Delete(ctx)
					return err
				},
			},
		},
		{
			name: "queue", is: "a queue", holds: "a queue", layout: "list",
			hold: func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, _ *redis.Client, n string) func() {
				require.NoError(t, rt.BlockingQueue(n).Offer(ctx, []byte("item")))
				return none
			},
			calls: map[string]func(context.Context, *actorlock.Runtime, string) error{
				"Offer": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					return rt.BlockingQueue(n).Offer(ctx, []byte("x"))
				},
				"Poll": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, _, err := rt.BlockingQueue(n).Poll(ctx)
					return err
				},
				"Take": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.BlockingQueue(n).Take(ctx)
					return err
				},
				"Len": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					_, err := rt.BlockingQueue(n).Len(ctx)
					return err
				},
			},
		},
		{
			name: "delayed-queue", is: "a delayed queue", holds: "a queue", layout: "list",
			hold: func(t *testing.T, ctx context.Context, rt *actorlock.Runtime, rdb *redis.Client, n string) func() {
				q := rt.DelayedQueue(n)
				defer q.Close()
				require.NoError(t, q.Offer(ctx, []byte("item"), 0))
				require.Eventually(t, func() bool { return rdb.LLen(ctx, n).Val() == 1 }, 10*time.Second, 5*time.Millisecond,
					"the item reaches the list")
				return none
			},
			calls: map[string]func(context.Context, *actorlock.Runtime, string) error{
				"Offer": func(ctx context.Context, rt *actorlock.Runtime, n string) error {
					q := rt.DelayedQueue(n)
					defer q.Close()
					return q.Offer(ctx, []byte("x"), time.Hour)
				},
			},
		},
	}
}

// Issue 32 item 3: one kind per name, for every primitive. For every pair
// of kinds, a name holding the first is asked for by every call of the
// second that touches the name: each is refused with ErrWrongKind, whose
// text names both kinds, at once (no call waits) and without writing
// anything (every key of the name is as it was). The exceptions are the
// kinds the Redis layout cannot tell apart, which share the name without
// ErrWrongKind: a lock and a fair lock (one hash), the two semaphores and
// the latch (one number), the blocking and the delayed queue (one list, by
// design).
func TestEveryKindRefusesAnotherKindsName(t *testing.T) {
	t.Parallel()
	_, rdb, rt := setup(t)
	cases := kindCases()
	for _, held := range cases {
		for _, asked := range cases {
			t.Run(held.name+"/"+asked.name, func(t *testing.T) {
				ctx := ctxFor(t, 60*time.Second)
				name := "kinds:" + held.name + ":" + asked.name
				release := held.hold(t, ctx, rt, rdb, name)
				defer release()
				shared := held.layout == asked.layout
				before := keysOf(t, ctx, rdb, name)
				require.NotEmpty(t, before, "%s holds the name", held.name)
				for call, fn := range asked.calls {
					callCtx, cancel := context.WithTimeout(ctx, kindCallWait)
					start := time.Now()
					err := fn(callCtx, rt, name)
					cancel()
					if shared {
						assert.NotErrorIs(t, err, actorlock.ErrWrongKind, "%s.%s on %s's name: one layout, shared", asked.name, call, held.name)
						continue
					}
					if !assert.ErrorIs(t, err, actorlock.ErrWrongKind, "%s.%s on %s's name", asked.name, call, held.name) {
						continue
					}
					assert.Less(t, time.Since(start), kindCallWait/2, "%s.%s waited", asked.name, call)
					assert.Contains(t, err.Error(), "it is "+held.holds+", not "+asked.is, "%s.%s names both kinds", asked.name, call)
					assert.Contains(t, err.Error(), `"`+name+`"`, "%s.%s names the name", asked.name, call)
				}
				if !shared {
					after := keysOf(t, ctx, rdb, name)
					for key := range after {
						// The duplicate guard of the refused request, which
						// every lock script keeps (scripts/guard.lua): it
						// records the refusal for the request's retries, and
						// expires.
						if _, ok := before[key]; !ok && strings.HasPrefix(key, "actorlock_request:") && rdb.PTTL(ctx, key).Val() > 0 {
							delete(after, key)
						}
					}
					assert.Equal(t, before, after, "nothing written to the keys of the name")
				}
			})
		}
	}
}

// keysOf is every key whose name contains name, with its DUMP (value and
// type; TTLs left out, they run down).
func keysOf(t *testing.T, ctx context.Context, rdb *redis.Client, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if key := iter.Val(); strings.Contains(key, name) {
			v, err := rdb.Dump(ctx, key).Result()
			if errors.Is(err, redis.Nil) {
				continue // expired meanwhile
			}
			require.NoError(t, err)
			out[key] = v
		}
	}
	require.NoError(t, iter.Err())
	return out
}
