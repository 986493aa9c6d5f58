package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

// Worker modes of the queue, semaphore and latch tests.
func init() {
	workerModes["dq-offer-exit"] = workerDelayedOfferExit
	workerModes["dq-mover"] = workerDelayedMover
	workerModes["sem-mutex"] = workerSemaphoreMutex
	workerModes["latch-await"] = workerLatchAwait
}

// workerDelayedOfferExit offers COUNT items "item-<i>" to QUEUE with delays
// of DELAY_MS + i ms, prints OFFERED and exits at once, without closing its
// runtime: nothing of this process is left to deliver them.
func workerDelayedOfferExit(rt *actorlock.Runtime, _ redis.UniversalClient) int {
	q := rt.DelayedQueue(os.Getenv("QUEUE"))
	ctx := context.Background()
	for i := range envInt("COUNT") {
		if err := q.Offer(ctx, fmt.Appendf(nil, "item-%d", i), time.Duration(envInt("DELAY_MS")+i)*time.Millisecond); err != nil {
			fmt.Fprintln(os.Stderr, "worker dq-offer-exit:", err)
			return 1
		}
	}
	fmt.Println("OFFERED")
	os.Exit(0)
	return 0
}

// workerDelayedMover opens QUEUE (so its mover runs here), offers items
// "<PROC>-<i>" for i < COUNT with random delays up to MAX_DELAY_MS, prints
// OFFERED and keeps its mover running until killed.
func workerDelayedMover(rt *actorlock.Runtime, _ redis.UniversalClient) int {
	q := rt.DelayedQueue(os.Getenv("QUEUE"))
	ctx := context.Background()
	proc, maxDelay := os.Getenv("PROC"), envInt("MAX_DELAY_MS")
	fmt.Println("READY")
	for i := range envInt("COUNT") {
		delay := time.Duration(rand.IntN(maxDelay+1)) * time.Millisecond
		if err := q.Offer(ctx, fmt.Appendf(nil, "%s-%d", proc, i), delay); err != nil {
			fmt.Fprintln(os.Stderr, "worker dq-mover:", err)
			return 1
		}
	}
	fmt.Println("OFFERED")
	select {}
}

// workerSemaphoreMutex runs OWNERS goroutines doing ITERS times: acquire one
// permit of SEMAPHORE, non-atomic read-modify-write of COUNTER_KEY, release.
// It prints one SECTION per critical section.
func workerSemaphoreMutex(rt *actorlock.Runtime, rdb redis.UniversalClient) int {
	sem, key := rt.Semaphore(os.Getenv("SEMAPHORE")), os.Getenv("COUNTER_KEY")
	owners, iters, proc := envInt("OWNERS"), envInt("ITERS"), os.Getpid()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rec recorder
	var wg sync.WaitGroup
	errs := make(chan error, owners)
	fmt.Println("READY")
	for o := range owners {
		wg.Go(func() {
			for range iters {
				if err := sem.Acquire(ctx, 1); err != nil {
					errs <- err
					return
				}
				start := time.Now().UnixNano()
				n, err := rdb.Get(ctx, key).Int()
				if err != nil && err != redis.Nil {
					errs <- err
					return
				}
				time.Sleep(100 * time.Microsecond) // widen the window a broken semaphore would expose
				if err := rdb.Set(ctx, key, n+1, 0).Err(); err != nil {
					errs <- err
					return
				}
				end := time.Now().UnixNano()
				rec.add(section{Proc: proc, Owner: fmt.Sprint(o), Start: start, End: end})
				if err := sem.Release(ctx, 1); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, "worker sem-mutex:", err)
		return 1
	}
	for _, s := range rec.sections {
		fmt.Printf("SECTION %d %d\n", s.Start, s.End)
	}
	return 0
}

// workerLatchAwait runs AWAITERS goroutines awaiting LATCH, prints READY,
// then one "DONE <unix ns>" per awaiter as it returns.
func workerLatchAwait(rt *actorlock.Runtime, _ redis.UniversalClient) int {
	l := rt.CountDownLatch(os.Getenv("LATCH"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := false
	for range envInt("AWAITERS") {
		wg.Go(func() {
			err := l.Await(ctx)
			at := time.Now().UnixNano()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fmt.Fprintln(os.Stderr, "worker latch-await:", err)
				failed = true
				return
			}
			fmt.Printf("DONE %d\n", at)
		})
	}
	fmt.Println("READY")
	wg.Wait()
	if failed {
		return 1
	}
	return 0
}
