// Package sim is issue 24's seeded simulation of the lock runtime: many
// goroutines of 1–3 runtimes on one real redis-server drive every lock kind
// through acquisitions, re-entries, cancellations, unlocks, extensions,
// force-unlocks and closes, while faults land at the Redis call boundary (a
// go-redis hook and a wrapped connection: delayed and lost replies, errors
// before sending, killed connections, delayed pub/sub messages, CLIENT PAUSE
// WRITE, restarts). A model checks every step against what Redis and the
// library's own objects say; a failing run prints its seed and the history
// of the name that broke. ./dev.sh sim [duration] [seed] runs it.
package sim

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/actorlock/actorlock/internal/redisserver"
)

func TestMain(m *testing.M) {
	if _, err := redisserver.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, "actorlock sim needs a real Redis:", err)
		os.Exit(2)
	}
	// go-redis logs every failed dial; the faults make many on purpose.
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
