package actorlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

// A lock with a timeout: the second caller waits at most its WaitTime for a
// lock someone else keeps, then gets ErrNotAcquired (a ctx that ends first
// ends the wait sooner, with ctx's error).
func ExampleWaitTime() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	first, err := rt.Lock("example:orders:42").Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	_, err = rt.Lock("example:orders:42").Acquire(ctx, actorlock.WaitTime(200*time.Millisecond))
	fmt.Println("not acquired:", errors.Is(err, actorlock.ErrNotAcquired), "after the wait:", time.Since(start) >= 200*time.Millisecond)
	_ = first.Unlock(ctx)

	held, err := rt.Lock("example:orders:42").Acquire(ctx, actorlock.WaitTime(5*time.Second))
	fmt.Println("acquired once free:", err == nil)
	_ = held.Unlock(ctx)
	// Output:
	// not acquired: true after the wait: true
	// acquired once free: true
}

// Downgrading a write lock: a writer takes the read side under its hold's
// context (a re-entry), then releases the write side and keeps reading.
// Other readers may then come in; writers still wait. The other way round
// (a reader asking for the write side) gets ErrUpgrade instead of a
// deadlock.
func ExampleReadWriteLock_downgrade() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	rw := rt.ReadWriteLock("example:settings")
	w, err := rw.WriteLocker().Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// ... write the new settings ...
	r, err := rw.ReadLocker().Acquire(w.Context()) // the writer reads too
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Unlock(ctx); err != nil { // downgraded: a reader now
		log.Fatal(err)
	}

	other, err := rt.ReadWriteLock("example:settings").ReadLocker().TryAcquire(ctx)
	fmt.Println("another reader gets in:", err == nil)
	_, err = rt.ReadWriteLock("example:settings").WriteLocker().TryAcquire(ctx)
	fmt.Println("a writer waits:", errors.Is(err, actorlock.ErrNotAcquired))
	_, err = rw.WriteLocker().Acquire(r.Context()) // upgrading is refused
	fmt.Println("upgrade:", errors.Is(err, actorlock.ErrUpgrade))
	_ = other.Unlock(ctx)
	_ = r.Unlock(ctx)
	// Output:
	// another reader gets in: true
	// a writer waits: true
	// upgrade: true
}

// On a Redis Cluster, give New a go-redis ClusterClient: every primitive
// works, each name's keys share one hash slot, and on Redis 7 waiters
// listen with sharded pub/sub (one connection per master).
func ExampleNew_cluster() {
	ctx := context.Background()
	seeds := strings.Split(os.Getenv("REDIS_CLUSTER_ADDRS"), ",") // some of the masters
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	err = rt.Lock("example:cluster:orders:42").Do(ctx, func(ctx context.Context) error {
		return rdb.Set(ctx, "example:cluster:orders:42:state", "paid", time.Minute).Err()
	})
	fmt.Println("done:", err)
	// Output:
	// done: <nil>
}

// Behind Sentinel, give New a go-redis failover client: the runtime follows
// the master through failovers (a failover can lose a lock granted just
// before it: see WithReplicaSync).
func ExampleNew_sentinel() {
	ctx := context.Background()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "example-master",
		SentinelAddrs: []string{os.Getenv("REDIS_SENTINEL_ADDR")},
	})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	held, err := rt.Lock("example:sentinel:orders:42").Acquire(ctx, actorlock.WaitTime(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token issued:", held.Token() > 0)
	fmt.Println("unlock:", held.Unlock(ctx))
	// Output:
	// token issued: true
	// unlock: <nil>
}

// A Redisson (Java) service and a Go service share a lock by its name: the
// keys, channels and hold counts are Redisson's. Here the Java side's
// commands are sent by hand, as Redisson's RLock.lock() and unlock() would
// send them for a client whose id is 7d7c1d6e-...-a0 on thread 1.
func Example_redisson() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	const name = "example:redisson:orders:42"
	const javaThread = "7d7c1d6e-5b1a-4e0f-9c3a-2f4b8e6d01a0:1" // Redisson's <client id>:<thread id>
	// Java: redisson.getLock(name).lock() — a hash of owner -> hold count.
	rdb.HSet(ctx, name, javaThread, 1)
	rdb.PExpire(ctx, name, 30*time.Second)

	lock := rt.Lock(name)
	_, err = lock.TryAcquire(ctx)
	fmt.Println("Go waits for Java:", errors.Is(err, actorlock.ErrNotAcquired))
	info, _ := lock.Holders(ctx)
	fmt.Println("held by:", info.Holders[0].Owner, "x", info.Holders[0].Count)

	// A Go handle acting as that Java thread re-enters its hold.
	asJava := rt.Lock(name, actorlock.WithOwner(javaThread))
	h, err := asJava.Acquire(ctx)
	n, _ := asJava.HoldCount(ctx)
	fmt.Println("as the Java thread:", err == nil, "holds:", n)
	_ = h.Unlock(ctx)

	// Java: unlock() — the last hold goes, and waiters are told on
	// Redisson's channel, which a Go waiter listens to.
	waiting := make(chan error, 1)
	go func() {
		held, err := lock.Acquire(ctx, actorlock.WaitTime(5*time.Second))
		if err == nil {
			err = held.Unlock(ctx)
		}
		waiting <- err
	}()
	time.Sleep(100 * time.Millisecond) // the Go waiter is waiting
	rdb.Del(ctx, name)
	rdb.Publish(ctx, "redisson_lock__channel:{"+name+"}", 0)
	fmt.Println("Go acquires after Java's unlock:", <-waiting)
	// Output:
	// Go waits for Java: true
	// held by: 7d7c1d6e-5b1a-4e0f-9c3a-2f4b8e6d01a0:1 x 1
	// as the Java thread: true holds: 2
	// Go acquires after Java's unlock: <nil>
}
