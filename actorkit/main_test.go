package actorkit_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// TestMain gives the examples a Redis: REDIS_ADDR's if set, else a
// redis-server started on a free loopback port; without one they are
// skipped (they need a real Redis).
func TestMain(m *testing.M) {
	if os.Getenv("REDIS_ADDR") == "" {
		srv, err := redisserver.Start()
		if err != nil {
			fmt.Fprintln(os.Stderr, "actorkit: examples skipped: set REDIS_ADDR or install redis-server:", err)
			os.Exit(0)
		}
		_ = os.Setenv("REDIS_ADDR", srv.Addr)
		code := m.Run()
		_ = srv.Close()
		os.Exit(code)
	}
	os.Exit(m.Run())
}
