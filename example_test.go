package actorlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// startRedis stands in for the Redis a service already has.
func startRedis() (addr string, stop func()) {
	srv, err := redisserver.Start()
	if err != nil {
		log.Fatal(err)
	}
	return srv.Addr, func() { _ = srv.Close() }
}

func Example() {
	addr, stop := startRedis()
	defer stop()
	ctx := context.Background()

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	rt, err := actorlock.New(rdb) // one per process and Redis deployment
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	held, err := rt.Lock("orders:42").Acquire(ctx, actorlock.WaitTime(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	// Work under held.Context(): it is cancelled if the lock is lost. Pass
	// held.Token() to the guarded resource so it can refuse stale writers.
	fmt.Println("locked:", held.Context().Err() == nil, "token > 0:", held.Token() > 0)

	// Another owner (another handle) cannot take it meanwhile.
	_, err = rt.Lock("orders:42").TryAcquire(ctx)
	fmt.Println("other owner:", errors.Is(err, actorlock.ErrNotAcquired))

	if err := held.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after unlock:", held.Err())
	// Output:
	// locked: true token > 0: true
	// other owner: true
	// after unlock: actorlock: already unlocked
}

func ExampleLock_Acquire_reentrant() {
	addr, stop := startRedis()
	defer stop()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	rt, _ := actorlock.New(rdb)
	defer rt.Close(ctx)

	l := rt.Lock("inventory")
	outer, _ := l.Acquire(ctx)
	// Reentrancy follows the context: an acquisition with a context of the
	// hold re-enters it; with any other it would wait, like sync.Mutex.
	inner, _ := l.Acquire(outer.Context())
	n, _ := l.HoldCount(outer.Context())
	fmt.Println("hold count:", n)
	_ = inner.Unlock(ctx)
	_ = outer.Unlock(ctx)
	locked, _ := l.IsLocked(ctx)
	fmt.Println("locked:", locked)
	// Output:
	// hold count: 2
	// locked: false
}
