package actorlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

// Lock, work while the lock is held, and stop when it is lost: held.Context()
// is cancelled, with a cause wrapping ErrLost, the moment the runtime learns
// that the lock is gone (here another client force-unlocks it).
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")}) // "": localhost:6379
	defer rdb.Close()
	rt, err := actorlock.New(rdb) // one per process and Redis deployment
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	held, err := rt.Lock("example:report").Acquire(ctx, actorlock.WaitTime(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer held.Unlock(context.WithoutCancel(ctx))

	work := func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done(): // the lock was lost: stop writing
				return context.Cause(ctx)
			case <-time.After(10 * time.Millisecond): // one step of work
			}
		}
	}
	go func() { // an operator breaks the lock
		time.Sleep(100 * time.Millisecond)
		_, _ = rt.Lock("example:report").ForceUnlock(ctx)
	}()
	err = work(held.Context())
	fmt.Println("lost:", errors.Is(err, actorlock.ErrLost))
	// Output:
	// lost: true
}

// A fenced write: the store keeps the highest fencing token it has seen and
// refuses a lower one, so a holder that lost the lock without knowing it
// (paused past its lease) cannot overwrite its successor's work.
func ExampleHeld_Token() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	// KEYS[1] the resource (a hash); ARGV[1] the token; ARGV[2] the value.
	const fencedSet = `if tonumber(ARGV[1]) < tonumber(redis.call('hget', KEYS[1], 'fence') or '0') then return 0 end
redis.call('hset', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2]) return 1`
	write := func(ctx context.Context, token int64, value string) bool {
		ok, err := rdb.Eval(ctx, fencedSet, []string{"example:fenced:resource"}, token, value).Bool()
		return err == nil && ok
	}

	lock := rt.Lock("example:fenced")
	first, _ := lock.Acquire(ctx)
	stale := first.Token()
	_ = first.Unlock(ctx) // (or: its lease ran out while it was paused)
	second, _ := lock.Acquire(ctx)
	fmt.Println("new holder writes:", write(second.Context(), second.Token(), "new"))
	fmt.Println("stale holder writes:", write(ctx, stale, "old"))
	_ = second.Unlock(ctx)
	// Output:
	// new holder writes: true
	// stale holder writes: false
}

// A re-entry: an acquisition whose context comes from a Held of the same
// lock adds a hold instead of waiting for itself.
func ExampleLock_Acquire_reentrant() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	l := rt.Lock("example:inventory")
	outer, _ := l.Acquire(ctx)
	// Reentrancy follows the context: an acquisition with a context of the
	// hold re-enters it; with any other it would wait, like sync.Mutex.
	inner, _ := l.Acquire(outer.Context())
	n, _ := l.HoldCount(outer.Context())
	fmt.Println("hold count:", n)
	_ = inner.Unlock(ctx)
	_ = outer.Unlock(ctx) // one Unlock per acquisition
	locked, _ := l.IsLocked(ctx)
	fmt.Println("locked:", locked)
	// Output:
	// hold count: 2
	// locked: false
}

// A fair lock serves its waiters in the order they arrived, across
// processes.
func ExampleRuntime_FairLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	first, _ := rt.FairLock("example:fair").Acquire(ctx)
	var wg sync.WaitGroup
	order := make(chan string, 3)
	for i, who := range []string{"a", "b", "c"} {
		wg.Go(func() {
			h, err := rt.FairLock("example:fair").Acquire(ctx, actorlock.WaitTime(10*time.Second))
			if err != nil {
				log.Fatal(err)
			}
			order <- who
			_ = h.Unlock(ctx)
		})
		// Start the next waiter once this one has its place in the queue
		// (Redisson's key of the fair lock's queue).
		for rdb.LLen(ctx, "redisson_lock_queue:{example:fair}").Val() < int64(i+1) {
			time.Sleep(time.Millisecond)
		}
	}
	_ = first.Unlock(ctx)
	wg.Wait()
	close(order)
	for who := range order {
		fmt.Print(who, " ")
	}
	fmt.Println()
	// Output:
	// a b c
}

// Readers share a read-write lock; a writer waits until they are gone.
func ExampleRuntime_ReadWriteLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	r1, _ := rt.ReadWriteLock("example:config").ReadLocker().Acquire(ctx)
	r2, err := rt.ReadWriteLock("example:config").ReadLocker().Acquire(ctx)
	fmt.Println("second reader:", err == nil)
	writer := rt.ReadWriteLock("example:config").WriteLocker()
	_, err = writer.TryAcquire(ctx)
	fmt.Println("writer while read:", errors.Is(err, actorlock.ErrNotAcquired))
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	w, err := writer.Acquire(ctx, actorlock.WaitTime(5*time.Second))
	fmt.Println("writer after the readers:", err == nil)
	_ = w.Unlock(ctx)
	// Output:
	// second reader: true
	// writer while read: true
	// writer after the readers: true
}

// A MultiLock takes all its locks or none: a transfer locks both accounts.
func ExampleMultiLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	both := actorlock.MultiLock(rt.Lock("example:acct:1"), rt.Lock("example:acct:2"))
	g, err := both.Acquire(ctx, actorlock.WaitTime(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	_, err = rt.Lock("example:acct:2").TryAcquire(ctx)
	fmt.Println("account 2 taken:", errors.Is(err, actorlock.ErrNotAcquired), "members:", len(g.Members()))
	// Move money under g.Context(); it is cancelled if any member is lost.
	_ = g.Unlock(ctx) // releases every member
	locked, _ := rt.Lock("example:acct:2").IsLocked(ctx)
	fmt.Println("after unlock:", locked)
	// Output:
	// account 2 taken: true members: 2
	// after unlock: false
}

// A RedLock holds when a majority of independent masters granted it: one
// runtime per master (two members on one server are refused, whatever
// their runtimes or databases).
func ExampleRedLock() {
	ctx := context.Background()
	var locks []*actorlock.Lock
	for _, addr := range strings.Split(os.Getenv("REDIS_MASTERS"), ",") { // three servers
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		rt, err := actorlock.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		defer rt.Close(ctx)
		locks = append(locks, rt.Lock("example:red"))
	}
	g, err := actorlock.RedLock(locks...).Acquire(ctx, actorlock.LeaseTime(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held on", len(g.Members()), "of 3 masters")
	_ = g.Unlock(ctx)
	// Output:
	// held on 3 of 3 masters
}

// A delayed queue moves each item into its blocking queue when it is due.
func ExampleRuntime_DelayedQueue() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	delayed := rt.DelayedQueue("example:jobs") // runs the mover; Close when done
	defer delayed.Close()
	start := time.Now()
	if err := delayed.Offer(ctx, []byte("send reminder"), 200*time.Millisecond); err != nil {
		log.Fatal(err)
	}
	job, err := rt.BlockingQueue("example:jobs").Take(ctx) // waits for it
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, after the delay: %v\n", job, time.Since(start) >= 200*time.Millisecond)
	// Output:
	// send reminder, after the delay: true
}

// A semaphore bounds how many holders work at once, across processes.
func ExampleRuntime_Semaphore() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	s := rt.Semaphore("example:pool")
	_, _ = s.TrySetPermits(ctx, 2) // only if never set
	_ = s.Acquire(ctx, 2)          // waits for 2 permits
	ok, _ := s.TryAcquire(ctx, 1)
	fmt.Println("third permit:", ok)
	_ = s.Release(ctx, 2)
	n, _ := s.Available(ctx)
	fmt.Println("available:", n)
	// Output:
	// third permit: false
	// available: 2
}

// A permit-expirable semaphore's permits have an id and a lease: a holder
// that dies gives its permit back when the lease ends.
func ExampleRuntime_PermitExpirableSemaphore() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	s := rt.PermitExpirableSemaphore("example:slots")
	_, _ = s.TrySetPermits(ctx, 1)
	id, err := s.Acquire(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	_, ok, _ := s.TryAcquire(ctx, 30*time.Second)
	fmt.Println("second permit:", ok)
	fmt.Println("release:", s.Release(ctx, id)) // ErrPermitExpired if the lease ran out first
	// Output:
	// second permit: false
	// release: <nil>
}

// A count-down latch lets waiters go once the count reaches zero.
func ExampleRuntime_CountDownLatch() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	boot := rt.CountDownLatch("example:boot")
	_, _ = boot.TrySetCount(ctx, 3)
	for range 3 { // three services report ready, maybe from other processes
		go func() { _ = rt.CountDownLatch("example:boot").CountDown(ctx) }()
	}
	err = boot.Await(ctx) // returns once the count is zero
	fmt.Println("all ready:", err == nil)
	// Output:
	// all ready: true
}

// Do acquires, runs the function under the hold's context and unlocks.
func ExampleLock_Do() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	err = rt.Lock("example:nightly-report").Do(ctx, func(ctx context.Context) error {
		// ctx is cancelled if the lock is lost.
		return rdb.Set(ctx, "example:nightly-report:done", "yes", time.Minute).Err()
	}, actorlock.WaitTime(5*time.Second))
	fmt.Println("report:", err)
	// Output:
	// report: <nil>
}

// A hold with a fixed lease can be extended while the work needs longer.
func ExampleHeld_Extend() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	held, err := rt.Lock("example:import").Acquire(ctx, actorlock.LeaseTime(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer held.Unlock(ctx)
	// ... the import turns out to be large:
	fmt.Println("extend:", held.Extend(ctx, time.Minute))
	ttl, _ := rt.Lock("example:import").RemainTTL(ctx)
	fmt.Println("more than 10 s left:", ttl > 10*time.Second)
	// Output:
	// extend: <nil>
	// more than 10 s left: true
}

// A Locker is a sync.Locker for code that takes one.
func ExampleRuntime_Locker() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	mu, err := rt.Locker("example:locker")
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	counter := 0
	for range 4 {
		wg.Go(func() {
			mu.Lock()
			counter++ // safe: goroutines sharing a Locker exclude each other
			mu.Unlock()
		})
	}
	wg.Wait()
	fmt.Println("counter:", counter, "unlock error:", mu.Err())
	// Output:
	// counter: 4 unlock error: <nil>
}

// WithKeyPrefix keeps an application's keys under its prefix on a shared
// Redis, as Redisson's NameMapper does.
func ExampleWithKeyPrefix() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	rt, err := actorlock.New(rdb, actorlock.WithKeyPrefix("example-app:"))
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	l := rt.Lock("orders:42")
	held, err := l.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	n, _ := rdb.Exists(ctx, "example-app:orders:42").Result()
	fmt.Println(l.Name(), "exists:", n == 1)
	_ = held.Unlock(ctx)
	// Output:
	// example-app:orders:42 exists: true
}
