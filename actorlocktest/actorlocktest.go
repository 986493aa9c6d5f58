// Package actorlocktest gives the tests of services that use actorlock a
// real Redis and a runtime, so they need not reinvent them:
//
//	func TestTransfer(t *testing.T) {
//		rt := actorlocktest.Runtime(t) // a fresh redis-server, closed and leak-checked after the test
//		held, err := rt.Lock("acct:1").Acquire(t.Context())
//		...
//	}
//
// Redis starts a redis-server on a free loopback port and can stop, kill,
// pause and restart it to inject faults. When redis-server is not
// installed, the test is skipped with an install hint, except where a skip
// would let a suite pass having tested nothing: in CI (CI=true, as CI
// services set it) or when ACTORLOCKTEST_REQUIRE=1, the test fails instead.
// ACTORLOCKTEST_REQUIRE=0 allows the skip in CI.
//
// actorlock needs a real Redis, not miniredis (the in-process fake): there,
// keys expire only when the test moves miniredis's clock, so a lease that
// ran out still blocks every other owner, and the delayed queue loses its
// items (no Lua struct library). tests/miniredis shows both.
package actorlocktest

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// Server is a redis-server process started for one test.
type Server struct {
	// Addr is its address, "127.0.0.1:<port>".
	Addr string
	srv  *redisserver.Server
}

// Redis starts a redis-server without persistence on a free loopback port
// and kills it when the test ends. args are extra configuration directives
// ("--maxmemory", "10mb"). Without redis-server in PATH, the test is
// skipped with an install hint, or fails in CI or when required (see
// RequireEnv); any other failure fails it.
func Redis(t testing.TB, args ...string) *Server {
	t.Helper()
	if _, err := redisserver.Binary(); err != nil {
		if why := redisRequired(); why != "" {
			t.Fatalf("actorlocktest: %v; failing, not skipping, since %s", err, why)
		}
		t.Skipf("actorlocktest: %v (set %s=1 to fail instead)", err, RequireEnv)
	}
	srv, err := redisserver.Start(args...)
	if err != nil {
		t.Fatalf("actorlocktest: starting redis-server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return &Server{Addr: srv.Addr, srv: srv}
}

// RequireEnv is the environment variable that says whether a test must
// fail, rather than skip, when redis-server is missing: a true value ("1",
// "true") requires it, a false one ("0", "false") allows the skip even in
// CI. Unset or empty, CI decides: CI=true requires it.
const RequireEnv = "ACTORLOCKTEST_REQUIRE"

// redisRequired says why a missing redis-server fails the test, or "" if
// it may be skipped.
func redisRequired() string {
	if v := os.Getenv(RequireEnv); v != "" {
		if on, err := strconv.ParseBool(v); err != nil || on {
			return RequireEnv + "=" + v
		}
		return ""
	}
	if on, _ := strconv.ParseBool(os.Getenv("CI")); on {
		return "CI=" + os.Getenv("CI") + " (set " + RequireEnv + "=0 to skip)"
	}
	return ""
}

// URL is the server's address as a redis:// URL (for redis.ParseURL, or a
// REDIS_URL setting).
func (s *Server) URL() string { return "redis://" + s.Addr }

// Client returns a go-redis client of the server, closed when the test
// ends (after the runtimes that use it, which close first).
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Kill ends the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() error { return s.srv.Kill() }

// Stop shuts the server down gracefully and waits for it.
func (s *Server) Stop() error { return s.srv.Stop() }

// Pause freezes the server (SIGSTOP): connections stay open, nothing
// answers, as with a long stall.
func (s *Server) Pause() error { return s.srv.Pause() }

// Resume continues a paused server.
func (s *Server) Resume() error { return s.srv.Resume() }

// Restart starts a stopped or killed server again on the same port; it
// comes back empty.
func (s *Server) Restart() error { return s.srv.Restart() }

// live counts the runtimes of this package not yet closed: the goroutine
// check runs when the last one closes, since goroutines of runtimes still
// open (a parallel test's) are not leaks.
var live atomic.Int64

// Runtime starts a runtime on a fresh redis-server (Redis) with opts.
func Runtime(t testing.TB, opts ...actorlock.Option) *actorlock.Runtime {
	t.Helper()
	return RuntimeOn(t, Redis(t).Client(t), opts...)
}

// RuntimeOn starts a runtime on rdb with opts. When the test ends, the
// runtime is closed, and the test fails if Close fails or if goroutines of
// actorlock are still running shortly after it (checked when no other
// runtime of this package is open).
func RuntimeOn(t testing.TB, rdb redis.UniversalClient, opts ...actorlock.Option) *actorlock.Runtime {
	t.Helper()
	rt, err := actorlock.New(rdb, opts...)
	if err != nil {
		t.Fatalf("actorlocktest: %v", err)
	}
	live.Add(1)
	t.Cleanup(func() {
		// A fresh context: the test's own is cancelled before cleanups.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := rt.Close(ctx)
		last := live.Add(-1) == 0
		if err != nil {
			t.Errorf("actorlocktest: closing the runtime: %v", err)
			return
		}
		if last {
			if stacks := leaked(5 * time.Second); stacks != "" {
				t.Errorf("actorlocktest: goroutines of actorlock still run after Close:\n%s", stacks)
			}
		}
	})
	return rt
}

// leaked waits up to patience for actorlock's goroutines to end and returns
// the stacks of those that did not ("" when none).
func leaked(patience time.Duration) string {
	deadline := time.Now().Add(patience)
	for {
		stacks := ours()
		if stacks == "" || time.Now().After(deadline) {
			return stacks
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ourPackages are the packages whose code runs in a runtime's goroutines
// (not internal/redisserver's, which Redis owns).
var ourPackages = []string{
	"github.com/actorlock/actorlock.",
	"github.com/actorlock/actorlock/actors.",
	"github.com/actorlock/actorlock/scripts.",
}

// ours returns the stacks of goroutines running actorlock code, except the
// calling one (this package's cleanup).
func ours() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the calling goroutine comes first
			continue
		}
		for _, pkg := range ourPackages {
			if strings.Contains(g, pkg) {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}
