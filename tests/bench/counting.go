package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// cmdCounter is a go-redis hook counting every command a client sends,
// pipelined ones included. Pub/sub commands bypass hooks; they are taken
// from the server's commandstats instead (see pubsubCommands).
type cmdCounter struct{ n atomic.Int64 }

var _ redis.Hook = (*cmdCounter)(nil)

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// pubsubCommands are sent on pub/sub connections, which go-redis hooks do
// not see; their server-side counts are added to the client-issued counts.
var pubsubCommands = []string{"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe"}

// cmdStats is INFO commandstats: calls per command (sub-commands such as
// "config|resetstat" separately). Rejected calls are included: the client
// sent them even though Redis refused to run them.
type cmdStats map[string]int64

func readCmdStats(ctx context.Context, admin *redis.Client) (cmdStats, error) {
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	return parseCmdStats(info)
}

// parseCmdStats reads lines such as
// "cmdstat_set:calls=3,usec=9,usec_per_call=3.00,rejected_calls=0,failed_calls=0".
func parseCmdStats(info string) (cmdStats, error) {
	out := cmdStats{}
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("commandstats: malformed line %q", line)
		}
		for field := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(field, "=")
			if k != "calls" && k != "rejected_calls" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("commandstats: %q: %w", line, err)
			}
			out[name] += n
		}
	}
	return out, nil
}

// sub returns s - before, per command.
func (s cmdStats) sub(before cmdStats) cmdStats {
	out := cmdStats{}
	for k, v := range s {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// harnessCommand: the harness's own INFO and CONFIG calls, left out of the
// server total.
func harnessCommand(name string) bool {
	return name == "info" || name == "config" || strings.HasPrefix(name, "config|")
}

// total sums every command but the harness's own.
func (s cmdStats) total() int64 {
	var n int64
	for k, v := range s {
		if !harnessCommand(k) {
			n += v
		}
	}
	return n
}

func (s cmdStats) pubsub() int64 {
	var n int64
	for _, k := range pubsubCommands {
		n += s[k]
	}
	return n
}
