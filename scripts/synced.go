package scripts

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Synced is a Client whose every command is followed, on the same
// connection, by WAIT Replicas Timeout: Acked then tells how many replicas
// have the command's writes. That is what makes a lock survive a failover to
// one of them (Redis replicates asynchronously). Timeout must stay below the
// client's read timeout. A Synced serves one call at a time.
type Synced struct {
	redis.UniversalClient
	Replicas int64
	Timeout  time.Duration
	Acked    int64 // replicas that confirmed the last command; -1: unknown
}

// Process runs cmd and WAIT in one pipeline, so both use one connection (a
// pipeline with a NoRetry command is not replayed either).
func (s *Synced) Process(ctx context.Context, cmd redis.Cmder) error {
	pipe := s.UniversalClient.Pipeline()
	_ = pipe.Process(ctx, cmd)
	wait := pipe.Do(ctx, "wait", s.Replicas, ms(s.Timeout))
	_, _ = pipe.Exec(ctx)
	s.Acked = -1
	if n, err := wait.Int64(); err == nil {
		s.Acked = n
	}
	return cmd.Err()
}
