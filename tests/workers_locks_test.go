package tests

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

// Worker modes of the fair, read-write and fencing tests.
func init() {
	workerModes["fair"] = workerFair
	workerModes["fairwait"] = workerFairWait
	workerModes["read"] = workerRead
	workerModes["fenced"] = workerFenced
}

// workerFair runs owners OWNERS (comma-separated global indexes) that start
// waiting for fair lock LOCK_NAME at START_NS + index*STEP_MS, each acquiring
// once, holding HOLD_MS and unlocking. It prints "A <index> <arrived ns>
// <acquired ns>" per owner.
func workerFair(rt *actorlock.Runtime, _ redis.UniversalClient) int {
	start, _ := strconv.ParseInt(os.Getenv("START_NS"), 10, 64)
	step := time.Duration(envInt("STEP_MS")) * time.Millisecond
	hold := time.Duration(envInt("HOLD_MS")) * time.Millisecond
	var owners []int
	for _, f := range strings.Split(os.Getenv("OWNERS"), ",") {
		n, _ := strconv.Atoi(f)
		owners = append(owners, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	failed := false
	for _, idx := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(time.Unix(0, start).Add(time.Duration(idx) * step)))
			arrived := time.Now().UnixNano()
			h, err := rt.FairLock(os.Getenv("LOCK_NAME")).Acquire(ctx, actorlock.WaitTime(30*time.Second))
			if err != nil {
				fmt.Fprintln(os.Stderr, "worker fair:", err)
				mu.Lock()
				failed = true
				mu.Unlock()
				return
			}
			acquired := time.Now().UnixNano()
			time.Sleep(hold)
			mu.Lock()
			fmt.Printf("A %d %d %d\n", idx, arrived, acquired)
			mu.Unlock()
			_ = h.Unlock(ctx)
		}()
	}
	wg.Wait()
	if failed {
		return 1
	}
	return 0
}

// workerFairWait queues WAITERS (default 1) waiters of fair lock LOCK_NAME,
// says "QUEUED" once all are in the Redis queue, and waits until killed.
func workerFairWait(rt *actorlock.Runtime, rdb redis.UniversalClient) int {
	name := os.Getenv("LOCK_NAME")
	ctx := context.Background()
	var owners []string
	for i := range max(envInt("WAITERS"), 1) {
		l := rt.FairLock(name, actorlock.WithOwner(fmt.Sprintf("%s:waiter%d", rt.ID(), i)))
		owners = append(owners, l.Owner())
		go func() { _, _ = l.Acquire(ctx) }()
	}
	for {
		queued, _ := rdb.LRange(ctx, "redisson_lock_queue:{"+name+"}", 0, -1).Result()
		if !slices.ContainsFunc(owners, func(o string) bool { return !slices.Contains(queued, o) }) {
			fmt.Println("QUEUED")
			select {}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// workerRead takes the read side of LOCK_NAME, says so and holds it until
// killed.
func workerRead(rt *actorlock.Runtime, _ redis.UniversalClient) int {
	h, err := rt.ReadWriteLock(os.Getenv("LOCK_NAME")).ReadLocker().Acquire(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker read:", err)
		return 1
	}
	fmt.Printf("READING %d\n", h.Token())
	select {}
}

// workerFenced acquires LOCK_NAME and prints "ACQUIRED <token>"; HOLD_MS
// later (during which it may be paused past its lease) it writes to the
// fenced resource with its token whatever happened meanwhile, and prints
// "WRITE accepted|rejected lost=<bool>".
func workerFenced(rt *actorlock.Runtime, rdb redis.UniversalClient) int {
	ctx := context.Background()
	h, err := rt.Lock(os.Getenv("LOCK_NAME")).Acquire(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker fenced:", err)
		return 1
	}
	fmt.Printf("ACQUIRED %d\n", h.Token())
	time.Sleep(time.Duration(envInt("HOLD_MS")) * time.Millisecond)
	ok, err := fencedWrite(ctx, rdb, "resource", h.Token(), "stale holder")
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker fenced:", err)
		return 1
	}
	verdict := "rejected"
	if ok {
		verdict = "accepted"
	}
	fmt.Printf("WRITE %s lost=%v\n", verdict, h.Err() != nil)
	return 0
}

// fencedWrite is how a resource uses fencing tokens: it remembers the
// highest token it has accepted and refuses writes carrying a lower one.
// Hashed by the server, so that this package also starts in FIPS 140-only
// mode (TestFIPSOnly), where Go's SHA-1 panics.
var fencedWriteScript = redis.NewScriptServerSHA(`
local last = tonumber(redis.call('hget', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) < last then
  return 0
end
redis.call('hset', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return 1`)

func fencedWrite(ctx context.Context, rdb redis.UniversalClient, key string, token int64, value string) (bool, error) {
	n, err := fencedWriteScript.Run(ctx, rdb, []string{key}, token, value).Int()
	return n == 1, err
}
