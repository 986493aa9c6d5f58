// Package chaos is actorlock's fault-injection suite: worker processes
// contend for locks and guard a fenced resource while faults hit them, Redis
// and the network between; a checker (porcupine) verifies the recorded
// history against docs/guarantees.md. ./dev.sh chaos [duration] runs
// it with a random seed; ./dev.sh test runs a short fixed-seed pass.
package chaos

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
	if os.Getenv(workerEnv) != "" {
		os.Exit(runWorker())
	}
	if _, err := redisserver.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, "actorlock chaos tests need a real Redis:", err)
		os.Exit(2)
	}
	// go-redis logs every failed dial; the faults make many on purpose.
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
