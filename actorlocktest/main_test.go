package actorlocktest_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// TestMain skips the example without redis-server, as Redis skips the
// tests: the example needs a real Redis.
func TestMain(m *testing.M) {
	flag.Parse()
	if _, err := redisserver.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, "actorlocktest: example skipped:", err)
		_ = flag.Set("test.skip", "^Example$")
	}
	os.Exit(m.Run())
}
