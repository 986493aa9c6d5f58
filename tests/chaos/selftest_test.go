package chaos

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// nopLock grants every request at once: the lock that does nothing. Its
// tokens come from a shared counter (increasing), or are all zero.
type nopLock struct {
	zero bool
	n    atomic.Int64
}

type nopHeld struct {
	tok  int64
	ctx  context.Context
	stop context.CancelFunc
}

func (h *nopHeld) Token() int64                     { return h.tok }
func (h *nopHeld) Done() <-chan struct{}            { return h.ctx.Done() }
func (h *nopHeld) Err() error                       { return nil }
func (h *nopHeld) Context() context.Context         { return h.ctx }
func (h *nopHeld) Unlock(ctx context.Context) error { h.stop(); return nil }

func (l *nopLock) acquire(ctx context.Context, name string, wait time.Duration) (holdAPI, error) {
	c, cancel := context.WithCancel(context.Background())
	h := &nopHeld{ctx: c, stop: cancel}
	if !l.zero {
		h.tok = l.n.Add(1)
	}
	return h, nil
}

// runInProcess runs clients goroutines of the worker loop with lk for d and
// checks their history.
func runInProcess(t *testing.T, lk locker, d time.Duration) *verdict {
	res, err := redisserver.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: res.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	log, err := openLog(filepath.Join(t.TempDir(), "h.jsonl"))
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		c := &client{id: i, names: []string{"a"}, wait: time.Second, lease: 200 * time.Millisecond, lk: lk, res: resource{rdb}, log: log,
			rng: rand.New(rand.NewPCG(1, uint64(i)))}
		wg.Add(1)
		go func() { defer wg.Done(); c.run(stop) }()
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	log.close()
	evs, err := readLog(log.f.Name())
	require.NoError(t, err)
	_ = os.Remove(log.f.Name())
	v := check(evs, nil, nil, runBounds(2*time.Second, time.Second))
	t.Logf("%v; problems: %q", v, v.Problems)
	return v
}

// The checker fails a lock that does nothing, loudly: with increasing
// tokens the fence keeps the resource consistent but the lock history is
// not linearizable; with equal tokens the resource loses updates too.
func TestCheckerCatchesNopLock(t *testing.T) {
	v := runInProcess(t, &nopLock{}, 2*time.Second)
	require.NotZero(t, v.Grants)
	assert.True(t, hasProblem(v, "lock history is not linearizable"), "overlapping holds not caught")
	assert.False(t, hasProblem(v, "fenced resource"), "the fence kept the resource right")
	v = runInProcess(t, &nopLock{zero: true}, 2*time.Second)
	assert.True(t, hasProblem(v, "lock history is not linearizable"), "overlapping holds not caught")
	assert.True(t, hasProblem(v, "fenced resource history is not linearizable"), "lost updates not caught")
}

func hasProblem(v *verdict, prefix string) bool {
	for _, p := range v.Problems {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}
