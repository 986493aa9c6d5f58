// Command scale measures one runtime holding many lock names, with the
// public API against a real redis-server it starts: how long acquiring,
// unlocking and Close take, the heap each held lock costs, whether the
// watchdog keeps every hold alive, and that names touched one after another
// leave no per-name state behind. It prints figures, asserts nothing about
// time, and exits non-zero only if a hold was lost or state stayed behind.
//
//	go run ./tests/scale -names 100000 -touch 1000000
//
// (./dev.sh scale runs it.)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
	"github.com/actorlock/actorlock/observe"
	"github.com/actorlock/actorlock/scripts"
)

func main() {
	names := flag.Int("names", 100_000, "names held at once (0: skip)")
	touch := flag.Int("touch", 1_000_000, "names acquired and unlocked one after another (0: skip)")
	lease := flag.Duration("lease", 3*time.Second, "watchdog lease")
	leases := flag.Int("hold", 3, "leases to hold the names for")
	flag.BoolVar(&closeHeld, "close-held", false, "Close with every name still held, instead of unlocking them first")
	workers := flag.Int("workers", 64, "goroutines acquiring and unlocking the held names")
	touchers := flag.Int("touchers", 4, "goroutines touching names")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of one phase of the held names here")
	flag.StringVar(&profiled, "profile", "hold", "the phase -cpuprofile covers: acquire, hold, unlock or close")
	memProfile := flag.String("memprofile", "", "write a heap profile, taken while every name is held (dormant, if they get there), here")
	flag.DurationVar(&heldIdle, "idle", time.Second, "idle timeout of the runtime holding the names: after it a held name goes dormant (no live actor)")
	flag.Parse()

	if *memProfile != "" {
		runtime.MemProfileRate = 256 // every allocation of a lock actor shows
	}
	redis.SetLogger(quiet{})
	srv, err := redisserver.Start()
	if err != nil {
		fail("starting redis-server: %v", err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 2 * *workers})
	defer rdb.Close()

	ok := true
	if *names > 0 {
		ok = held(rdb, *names, *lease, *leases, *workers, *cpuProfile, *memProfile) && ok
	}
	if *touch > 0 {
		ok = touched(rdb, *touch, *touchers) && ok
	}
	if !ok {
		_ = srv.Close()
		os.Exit(1)
	}
}

// logger shows the runtime's warnings (a failed renewal, say).
var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scale: "+format+"\n", args...)
	os.Exit(2)
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// parallel runs fn(i) for i in [0, n) on w goroutines and returns how long
// that took and the first error.
func parallel(n, w int, fn func(i int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	start := time.Now()
	for g := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += w {
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return time.Since(start), *e
	}
	return time.Since(start), nil
}

// held: n names acquired by w goroutines, held for leases watchdog leases
// while the smallest PTTL among them is sampled, unlocked, then Close.
// closeHeld: Close releases the held names (no unlock phase).
var closeHeld bool

// heldIdle is the idle timeout of the runtime holding the names.
var heldIdle time.Duration

// profiled is the phase of held that -cpuprofile covers.
var profiled string

// profile starts the CPU profile if phase is the one asked for; the
// function it returns stops it.
func profile(path, phase string) func() {
	if path == "" || phase != profiled {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fail("%v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fail("%v", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }
}

func held(rdb *redis.Client, n int, lease time.Duration, leases, w int, cpuProfile, memProfile string) bool {
	ctx := context.Background()
	rt, err := actorlock.New(rdb, actorlock.WithWatchdog(lease), actorlock.WithLogger(logger), actorlock.WithIdleTimeout(heldIdle))
	if err != nil {
		fail("%v", err)
	}
	name := func(i int) string { return fmt.Sprintf("scale:held:%d", i) }
	base := heap()
	helds := make([]*actorlock.Held, n)
	stop := profile(cpuProfile, "acquire")
	acquire, err := parallel(n, w, func(i int) (err error) {
		helds[i], err = rt.Lock(name(i)).Acquire(ctx)
		return err
	})
	stop()
	if err != nil {
		fail("acquire: %v", err)
	}
	perLive := (int64(heap()) - int64(base)) / int64(n)
	st, _ := rt.Stats(ctx)
	// The heap per held lock once every name is dormant (no live actor),
	// measured during the hold a second after they all are (the actors
	// that went dormant last are still stopping at first).
	perLock, dormantAfter, measured := perLive, time.Duration(-1), false
	acquired := time.Now()
	var atMeasure observe.Stats
	measure := func() {
		perLock = (int64(heap()) - int64(base)) / int64(n)
		atMeasure, _ = rt.Stats(ctx)
		if memProfile != "" {
			f, err := os.Create(memProfile)
			if err != nil {
				fail("%v", err)
			}
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
	}
	scriptsBefore := scriptCalls(rdb)
	stop = profile(cpuProfile, "hold")

	// Hold: the smallest PTTL of the keys, read by a script over a slice of
	// them every 50 ms, the slices going round all n keys (a pipeline of n
	// PTTLs would load this process, which is what is measured; one script
	// over all would stall Redis, and the renewals with it).
	minPTTL := lease
	checked := 0
	const slice = 2000
	for end := time.Now().Add(time.Duration(leases) * lease); time.Now().Before(end); checked += slice {
		from := checked % n
		ms, err := minPTTLScript.Run(ctx, rdb, nil, "scale:held:", from, min(from+slice, n)).Int64()
		if err != nil {
			fail("PTTL sweep: %v", err)
		}
		minPTTL = min(minPTTL, time.Duration(ms)*time.Millisecond) // a missing key reads -2 ms
		if dormantAfter < 0 {
			if s, err := rt.Stats(ctx); err == nil && s.DormantLocks == n {
				dormantAfter = time.Since(acquired)
			}
		}
		if !measured && dormantAfter >= 0 && time.Since(acquired) >= dormantAfter+time.Second {
			measure()
			measured = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !measured {
		measure()
	}
	renewScripts := scriptCalls(rdb) - scriptsBefore
	stop()
	lost := 0
	for _, h := range helds {
		if h.Err() != nil {
			lost++
		}
	}
	// Every key must still carry its holder's owner field.
	pipe := rdb.Pipeline()
	exist := make([]*redis.BoolCmd, n)
	for i, h := range helds {
		exist[i] = pipe.HExists(ctx, name(i), h.Owner())
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range exist {
		if !c.Val() {
			lost++
		}
	}

	var unlockErrs atomic.Int64
	stop = profile(cpuProfile, "unlock")
	unlock, _ := parallel(n, w, func(i int) error {
		if closeHeld {
			return nil // Close releases them
		}
		if err := helds[i].Unlock(ctx); err != nil {
			if unlockErrs.Add(1) == 1 {
				fmt.Fprintf(os.Stderr, "scale: unlock %s: %v\n", name(i), err)
			}
		}
		return nil
	})
	stop()
	stop = profile(cpuProfile, "close")
	start := time.Now()
	closeErr := rt.Close(ctx)
	closing := time.Since(start)
	stop()
	left, _ := rdb.Exists(ctx, name(0), name(n/2), name(n-1)).Result()
	closed := "Close afterwards"
	if closeHeld {
		closed = "Close with all held"
	}

	fmt.Printf("| held names | acquire all | heap per held lock | renewal | unlock all | %s |\n", closed)
	fmt.Printf("|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %.2f s | %.2f KiB | %d scripts of up to %d names in %d leases (each name renewed %.1f times a lease), min PTTL %.2f s of %v | %.2f s | %.2f s |\n",
		n, acquire.Seconds(), float64(perLock)/1024, renewScripts, scripts.MaxRenewBatch, leases,
		float64(renewScripts)*scripts.MaxRenewBatch/float64(n)/float64(leases), minPTTL.Seconds(), lease,
		unlock.Seconds(), closing.Seconds())
	dormant := "never all dormant: heap per held lock measured at the end of the hold"
	if dormantAfter >= 0 {
		dormant = fmt.Sprintf("all dormant %.1f s after acquiring (idle timeout %v): heap per held lock measured 1 s later, %d of %d dormant then",
			dormantAfter.Seconds(), heldIdle, atMeasure.DormantLocks, atMeasure.LockActors)
	}
	fmt.Printf("while held: %d lock actors, %d renewals, %d subscriptions; heap per held lock with live actors %.2f KiB; %s; each PTTL read %.1f times; holds lost: %d; failed unlocks: %d; keys left after Close: %d; Close: %v\n\n",
		st.LockActors, st.Renewals, st.Subscriptions, float64(perLive)/1024, dormant, float64(checked)/float64(n), lost, unlockErrs.Load(), left, closeErr)
	return lost == 0 && unlockErrs.Load() == 0 && minPTTL >= lease/3 && left == 0 && closeErr == nil
}

// minPTTLScript returns the smallest PTTL of keys ARGV[1]..ARGV[2] to
// ARGV[1]..ARGV[3]-1 (-2 if one is missing). It names keys outside KEYS, which a single
// server allows.
var minPTTLScript = redis.NewScript(`
local least = nil
for i = tonumber(ARGV[2]), tonumber(ARGV[3]) - 1 do
	local t = redis.call('pttl', ARGV[1] .. i)
	if least == nil or t < least then least = t end
end
return least`)

// scriptCalls is how many scripts Redis has run (EVAL and EVALSHA).
func scriptCalls(rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		return 0
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_eval:", "cmdstat_evalsha:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				var calls int64
				_, _ = fmt.Sscanf(rest, "calls=%d", &calls)
				total += calls
			}
		}
	}
	return total
}

// touched: n names acquired and unlocked by w goroutines one after another;
// afterwards the runtime must keep nothing per name (once the idle timeout
// passed) and Redis show no channel of ours.
func touched(rdb *redis.Client, n, w int) bool {
	ctx := context.Background()
	const idle = 500 * time.Millisecond
	rt, err := actorlock.New(rdb, actorlock.WithIdleTimeout(idle))
	if err != nil {
		fail("%v", err)
	}
	defer rt.Close(ctx)
	// Warm up the connection pool and the actor registry's shards.
	if _, err := parallel(10_000, w, func(i int) error { return touchOne(ctx, rt, fmt.Sprintf("scale:warm:%d", i)) }); err != nil {
		fail("touch: %v", err)
	}
	if !settle(ctx, rt, 30*time.Second) {
		fail("warm-up left state: %+v", stats(ctx, rt))
	}
	base := heap()
	var maxActors atomic.Int64
	took, err := parallel(n, w, func(i int) error {
		if i%50_000 == 0 {
			if st, err := rt.Stats(ctx); err == nil && int64(st.LockActors) > maxActors.Load() {
				maxActors.Store(int64(st.LockActors))
			}
		}
		return touchOne(ctx, rt, fmt.Sprintf("scale:touch:%d", i))
	})
	if err != nil {
		fail("touch: %v", err)
	}
	settled := time.Now()
	clean := settle(ctx, rt, 60*time.Second)
	settling := time.Since(settled)
	grown := (int64(heap()) - int64(base)) / int64(n)
	channels, _ := rdb.PubSubChannels(ctx, "*").Result()
	fmt.Printf("| names touched | acquire+unlock each | lock actors alive at most | state after idle timeout (%v) | heap left per name | PUBSUB CHANNELS |\n", idle)
	fmt.Printf("|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %.1f s (%.0f/s, %d goroutines) | %d | %+v after %.1f s | %d B | %d |\n",
		n, took.Seconds(), float64(n)/took.Seconds(), w, maxActors.Load(), stats(ctx, rt), settling.Seconds(), grown, len(channels))
	return clean && len(channels) == 0
}

func touchOne(ctx context.Context, rt *actorlock.Runtime, name string) error {
	h, err := rt.Lock(name).Acquire(ctx)
	if err != nil {
		return err
	}
	return h.Unlock(ctx)
}

func stats(ctx context.Context, rt *actorlock.Runtime) observe.Stats {
	st, err := rt.Stats(ctx)
	if err != nil && !errors.Is(err, actorlock.ErrClosed) {
		fail("stats: %v", err)
	}
	return st
}

// settle waits until the runtime keeps no per-name state.
func settle(ctx context.Context, rt *actorlock.Runtime, limit time.Duration) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if stats(ctx, rt) == (observe.Stats{}) {
			return true
		}
	}
	return false
}
