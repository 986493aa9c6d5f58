package actorlock_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// TestMain gives the examples a Redis: REDIS_ADDR's if set, else a
// redis-server started on a free loopback port. Without either, the
// examples are skipped (they need a real Redis) and the tests still run.
func TestMain(m *testing.M) {
	flag.Parse()
	var srv *redisserver.Server
	if os.Getenv("REDIS_ADDR") == "" {
		var err error
		if srv, err = redisserver.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "actorlock: examples skipped: set REDIS_ADDR or install redis-server:", err)
			_ = flag.Set("test.skip", "^Example")
		} else {
			_ = os.Setenv("REDIS_ADDR", srv.Addr)
		}
	}
	code := m.Run()
	if srv != nil {
		_ = srv.Close()
	}
	os.Exit(code)
}
