package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// TestConcurrentUnlocksOfOneOwner: the simulation found (seed 2, no fault
// injected) that when two Helds of one owner (WithOwner, or a re-entry) are
// unlocked at the same moment, one Unlock may return ErrLost ("the hold
// ended before this unlock") while that Held's Done never closes and
// rt.Held() keeps listing it, although Redis holds nothing any more. Both
// Unlocks must succeed (or the one reporting a loss must end its Held),
// and nothing may stay held.
func TestConcurrentUnlocksOfOneOwner(t *testing.T) {
	srv, err := redisserver.Start()
	require.NoError(t, err)
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, fair := range []bool{false, true} {
		for round := 0; round < 20; round++ {
			name := fmt.Sprintf("owner-unlock-%v-%d", fair, round)
			l := rt.Lock(name, actorlock.WithOwner("sim-owner"))
			if fair {
				l = rt.FairLock(name, actorlock.WithOwner("sim-owner"))
			}
			h1, err := l.Acquire(ctx)
			require.NoError(t, err)
			h2, err := l.Acquire(ctx)
			require.NoError(t, err)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, h := range []*actorlock.Held{h1, h2} {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = h.Unlock(ctx) }()
			}
			wg.Wait()
			for i, h := range []*actorlock.Held{h1, h2} {
				select {
				case <-h.Done():
				case <-time.After(5 * time.Second):
					t.Fatalf("fair %v round %d: Held %d's Unlock returned %v, yet its Done is still open 5s later (Err %v)", fair, round, i+1, errs[i], h.Err())
				}
				require.NoError(t, errs[i], "fair %v round %d: Unlock of Held %d of the owner's two", fair, round, i+1)
			}
			n, err := rdb.Exists(ctx, name).Result()
			require.NoError(t, err)
			require.Zero(t, n, "fair %v round %d: the lock is still held after both Unlocks", fair, round)
		}
	}
	require.Empty(t, rt.Held(), "rt.Held() still lists holds of the owner")
}
