package actorlocktest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

func TestRuntimeLocksOnItsOwnRedis(t *testing.T) {
	srv := Redis(t)
	rdb := srv.Client(t)
	rt := RuntimeOn(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h, err := rt.Lock("orders:42").Acquire(ctx)
	require.NoError(t, err)
	n, err := rdb.HGet(ctx, "orders:42", h.Owner()).Int()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = Runtime(t).Lock("orders:42").TryAcquire(ctx)
	require.NoError(t, err, "Runtime has a Redis of its own")
	require.NoError(t, h.Unlock(ctx))
}

// Faults: a killed server refuses, a restarted one serves again (empty).
func TestServerInjectsFaults(t *testing.T) {
	srv := Redis(t)
	rt := RuntimeOn(t, srv.Client(t), actorlock.WithCallTimeout(2*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, srv.Kill())
	_, err := rt.Lock("a").TryAcquire(ctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, actorlock.ErrNotAcquired)
	require.NoError(t, srv.Restart())
	require.Eventually(t, func() bool {
		h, err := rt.Lock("a").TryAcquire(ctx)
		return err == nil && h.Unlock(ctx) == nil
	}, 10*time.Second, 50*time.Millisecond)
}

func TestRedisSkipsWithoutRedisServer(t *testing.T) {
	reached := false
	t.Run("no redis-server", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		t.Setenv("CI", "")
		t.Setenv(RequireEnv, "")
		Redis(t)
		reached = true
	})
	assert.False(t, reached, "Redis returned without redis-server")
}

// A runtime left open with a waiter blocked in Acquire is what the check
// exists for: it reports the goroutine, naming actorlock's code.
func TestLeakCheckReportsGoroutinesLeftRunning(t *testing.T) {
	srv := Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	forgotten, err := actorlock.New(srv.Client(t))
	require.NoError(t, err)
	h, err := forgotten.Lock("x").Acquire(ctx)
	require.NoError(t, err)
	waiting := make(chan error, 1)
	go func() {
		_, err := forgotten.Lock("x").Acquire(ctx)
		waiting <- err
	}()

	fake := &fakeTB{TB: t}
	RuntimeOn(fake, srv.Client(t))
	fake.cleanup()
	require.Len(t, fake.errors, 1)
	assert.Contains(t, fake.errors[0], "goroutines of actorlock still run after Close")
	assert.Contains(t, fake.errors[0], "github.com/actorlock/actorlock/actors.")

	require.NoError(t, forgotten.Close(ctx))
	assert.ErrorIs(t, <-waiting, actorlock.ErrClosed)
	assert.ErrorIs(t, h.Err(), actorlock.ErrClosed)
}

// fakeTB records what RuntimeOn reports and runs its cleanups on demand.
type fakeTB struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(format string, a ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, a...))
}
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.TB.Fatalf("unexpected: "+format, a...)
}

func (f *fakeTB) cleanup() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// childEnv marks the run of this test binary that
// TestRedisFailsWithoutRedisServerWhenRequired starts, in which Redis is
// called without redis-server.
const childEnv = "ACTORLOCKTEST_CHILD"

// In CI, or when asked, a missing redis-server fails the test: a skip
// would let the suite pass having tested nothing. Run in a child process
// of the test binary, since the failure is the outcome.
func TestRedisFailsWithoutRedisServerWhenRequired(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		Redis(t)
		t.Log("Redis returned")
		return
	}
	for _, tc := range []struct {
		env  []string
		fail bool
	}{
		{[]string{"CI=true"}, true},
		{[]string{RequireEnv + "=1"}, true},
		{[]string{"CI=true", RequireEnv + "=0"}, false},
		{nil, false},
		{[]string{"CI=false"}, false},
	} {
		t.Run(strings.Join(append([]string{"env"}, tc.env...), " "), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRedisFailsWithoutRedisServerWhenRequired$", "-test.v")
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); k != "CI" && k != RequireEnv && k != "PATH" {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, "PATH="+t.TempDir(), childEnv+"=1")
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			if tc.fail {
				assert.Error(t, err, "the child run fails")
				assert.Contains(t, string(out), "--- FAIL")
				assert.Contains(t, string(out), "failing, not skipping")
			} else {
				assert.NoError(t, err, "the child run passes")
				assert.Contains(t, string(out), "--- SKIP")
			}
			assert.NotContains(t, string(out), "Redis returned")
		})
	}
}
