package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// scriptBatches counts, through a go-redis hook, the lock scripts (EVALSHA
// and EVAL) the client sends: alone, or in pipelines, by pipeline size.
type scriptBatches struct {
	mu      sync.Mutex
	single  int
	batched map[int]int // scripts in the pipeline: pipelines
}

func isScript(c redis.Cmder) bool {
	n := strings.ToLower(c.Name())
	return n == "evalsha" || n == "eval"
}

func (s *scriptBatches) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *scriptBatches) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			s.mu.Lock()
			s.single++
			s.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (s *scriptBatches) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if isScript(c) {
				n++
			}
		}
		if n > 0 {
			s.mu.Lock()
			s.batched[n]++
			s.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// Lock actors that have a script to run at the same moment share round
// trips: their scripts leave in one pipeline. Outcomes stay exact: 32
// goroutines on 8 names (4 each) increment unprotected counters under the
// lock, and every increment is there.
func TestConcurrentNamesShareRoundTrips(t *testing.T) {
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	hook := &scriptBatches{batched: map[int]int{}}
	rdb.AddHook(hook)
	rt := newRuntime(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const goroutines, names, iterations = 32, 8, 50
	var wg sync.WaitGroup
	var failures atomic.Int64
	for g := range goroutines {
		name := fmt.Sprintf("pipelined:%d", g%names)
		l := rt.Lock(name)
		wg.Go(func() {
			for range iterations {
				held, err := l.Acquire(ctx, actorlock.WaitTime(30*time.Second))
				if err != nil {
					failures.Add(1)
					t.Errorf("acquire %s: %v", name, err)
					return
				}
				n, err := rdb.Get(ctx, name+":counter").Int()
				if err != nil && !errors.Is(err, redis.Nil) {
					t.Error(err)
				}
				require.NoError(t, rdb.Set(ctx, name+":counter", n+1, 0).Err())
				if err := held.Unlock(ctx); err != nil {
					t.Errorf("unlock %s: %v", name, err)
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, failures.Load())
	for i := range names {
		n, err := rdb.Get(ctx, fmt.Sprintf("pipelined:%d:counter", i)).Int()
		require.NoError(t, err)
		assert.Equal(t, goroutines/names*iterations, n, "name %d: an increment was lost, so two held the lock at once", i)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	pipelines, inPipelines := 0, 0
	for size, count := range hook.batched {
		if size >= 2 {
			pipelines += count
			inPipelines += size * count
		}
	}
	t.Logf("scripts sent alone %d; pipelines of 2 or more scripts %d, carrying %d scripts; by size %v",
		hook.single, pipelines, inPipelines, hook.batched)
	assert.NotZero(t, pipelines, "no two lock scripts ever shared a round trip")
}

// Scripts sent in a shared pipeline run exactly once even when connections
// die under them (CLIENT KILL every 20 ms, for 3 s): go-redis does not replay a
// pipeline of lock scripts, and a re-attempt after an unknown outcome tells
// the script the hold count seen. Every goroutine re-enters its lock
// through the hold's context, checks the count Redis keeps, and unlocks
// twice; at the end no lock key is left, which a hold counted twice
// would.
func TestPipelinedScriptsRunOnceWhenConnectionsDie(t *testing.T) {
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	rt := newRuntime(t, rdb, actorlock.WithWatchdog(10*time.Second))
	admin := client(t, srv.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	stop := make(chan struct{})
	var kills atomic.Int64
	var killer sync.WaitGroup
	killer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if err := admin.Do(ctx, "client", "kill", "type", "normal", "skipme", "yes").Err(); err == nil {
				kills.Add(1)
			}
		}
	})

	const goroutines = 16
	end := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	var acquired, refused atomic.Int64
	for g := range goroutines {
		name := fmt.Sprintf("killed:%d", g)
		l := rt.Lock(name)
		wg.Go(func() {
			for time.Now().Before(end) {
				outer, err := l.Acquire(ctx, actorlock.WaitTime(20*time.Second))
				if err != nil {
					// A call whose every re-attempt met a dead connection
					// reports it; what matters is what Redis keeps.
					refused.Add(1)
					continue
				}
				inner, err := l.Acquire(outer.Context(), actorlock.WaitTime(20*time.Second))
				if err == nil {
					acquired.Add(1)
					count, herr := admin.HGet(ctx, name, outer.Owner()).Int()
					if herr == nil {
						assert.Equal(t, 2, count, "%s: Redis counts the re-entered hold once", name)
					}
					_ = inner.Unlock(ctx)
				}
				_ = outer.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()
	t.Logf("%d connection kills; %d re-entered holds; %d acquisitions refused", kills.Load(), acquired.Load(), refused.Load())
	require.NotZero(t, acquired.Load())
	require.NotZero(t, kills.Load())
	// A failed unlock is retried by the runtime until it is known; give the
	// last ones a moment to land.
	require.Eventually(t, func() bool {
		n, err := admin.Exists(ctx, lockNames(goroutines)...).Result()
		return err == nil && n == 0
	}, 5*time.Second, 20*time.Millisecond, "a lock key outlived its last unlock: a hold was counted twice")
}

func lockNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("killed:%d", i)
	}
	return out
}
