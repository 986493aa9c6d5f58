// Package tests holds actorlock's integration tests. Every test talks to real
// redis-server processes started on free loopback ports (internal/redisserver);
// several tests also run child processes of this test binary (see worker.go
// style helpers in workers_test.go) to contend across processes.
package tests

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
	"github.com/actorlock/actorlock/scripts"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(workerEnv); mode != "" {
		os.Exit(runWorker(mode))
	}
	if _, err := redisserver.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, "actorlock tests need a real Redis:", err)
		os.Exit(2)
	}
	// go-redis logs each failed dial to stderr; several tests kill Redis on
	// purpose, and their assertions report what matters.
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// startRedis runs a fresh redis-server for the test and kills it afterwards.
func startRedis(t testing.TB, extra ...string) *redisserver.Server {
	t.Helper()
	srv, err := redisserver.Start(extra...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// client returns a go-redis client for addr, closed after the test.
func client(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newRuntime starts a runtime closed after the test (with a fresh context:
// the test's own is cancelled before cleanups run).
func newRuntime(t testing.TB, rdb redis.UniversalClient, opts ...actorlock.Option) *actorlock.Runtime {
	t.Helper()
	rt, err := actorlock.New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	})
	return rt
}

// setup is the common case: one Redis, one client, one runtime.
func setup(t testing.TB, opts ...actorlock.Option) (*redisserver.Server, *redis.Client, *actorlock.Runtime) {
	t.Helper()
	srv := startRedis(t)
	rdb := client(t, srv.Addr)
	return srv, rdb, newRuntime(t, rdb, opts...)
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// section is one critical section: who held the lock, with which token,
// from when to when (wall clock ns, comparable across processes here).
type section struct {
	Proc  int    `json:"p"`
	Owner string `json:"o"`
	Token int64  `json:"t"`
	Start int64  `json:"s"`
	End   int64  `json:"e"`
}

type recorder struct {
	mu       sync.Mutex
	sections []section
}

func (r *recorder) add(s section) {
	r.mu.Lock()
	r.sections = append(r.sections, s)
	r.mu.Unlock()
}

// assertExclusive checks that no two critical sections overlap and that
// fencing tokens strictly increase in the order the sections ran.
func assertExclusive(t *testing.T, sections []section) {
	t.Helper()
	s := assertNoOverlap(t, sections)
	for i := 1; i < len(s); i++ {
		if s[i].Token <= s[i-1].Token {
			t.Fatalf("fencing token did not increase: %+v then %+v", s[i-1], s[i])
		}
	}
}

// assertNoOverlap checks that no two critical sections overlap and returns
// them in the order they ran.
func assertNoOverlap(t *testing.T, sections []section) []section {
	t.Helper()
	s := append([]section(nil), sections...)
	sort.Slice(s, func(i, j int) bool { return s[i].Start < s[j].Start })
	for i := 1; i < len(s); i++ {
		if prev, cur := s[i-1], s[i]; cur.Start < prev.End {
			t.Fatalf("critical sections overlap: %+v and %+v (%v)", prev, cur, time.Duration(prev.End-cur.Start))
		}
	}
	return s
}

// commandCalls reads how often a command ran from INFO commandstats
// (commands run by scripts included).
func commandCalls(info, cmd string) int64 {
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		return n
	}
	return 0
}

// median of durations.
func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// ownersOf is a lock HASH's fields less the holds' mark
// (scripts.HoldMarkField), which names no owner: what each owner counts.
func ownersOf(fields map[string]string) map[string]string {
	delete(fields, scripts.HoldMarkField)
	return fields
}
