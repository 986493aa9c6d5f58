package tests

import (
	"context"
	"fmt"
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
