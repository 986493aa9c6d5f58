// Package scripts holds actorlock's Lua scripts (one .lua file each, embedded)
// and the typed calls that own each script's KEYS/ARGV contract, with the
// Redisson-compatible key and channel names they use.
//
// It is actorlock's machinery: importable only because the repository's
// layout keeps it at the top level, it makes no compatibility promise and
// exports only what actorlock's other packages (actors, the root, the
// actorlock command, internal/inspect) use.
package scripts

import (
	"context"
	"crypto/fips140"
	_ "embed"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is what the scripts need from a go-redis client: every
// redis.UniversalClient (single node, failover, cluster, ring) is one.
type Client interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
}

// onceCmd is a script call go-redis must not replay: go-redis retries a
// command whose connection broke after it was written, and a lock script
// that ran twice would count a hold twice. Our callers retry instead, telling
// the script that the earlier attempt may have taken effect.
type onceCmd struct{ *redis.Cmd }

func (onceCmd) NoRetry() bool { return true }

// script is one embedded Lua source (with the prelude it needs), compiled
// once per way of publishing: scripts that announce something call
// redis.call(PUBLISH, ...), and PUBLISH is 'spublish' when the client is
// Sharded (a Redis 7 cluster: the message then reaches only the channel's
// shard, where its subscribers are) and 'publish' otherwise.
type script struct {
	plain, sharded variant
	name           string // for metrics (observe.go)
}

// variant is one compiled source and its SHA1.
type variant struct {
	*redis.Script
	src string
}

// newVariant hashes src for EVALSHA. In FIPS 140-only mode
// (GODEBUG=fips140=only) Go's SHA-1 panics, which at package init would crash
// every program importing actorlock: there the server computes the hash
// instead (SCRIPT LOAD on first use; the ACL user then needs +script|load).
func newVariant(src string) variant {
	if fips140.Enforced() {
		return variant{Script: redis.NewScriptServerSHA(src), src: src}
	}
	return variant{Script: redis.NewScript(src), src: src}
}

func newScript(parts ...string) script {
	var body string
	for _, p := range parts {
		body += p
	}
	s := script{plain: newVariant("local PUBLISH = 'publish'\n" + body)}
	s.sharded = s.plain
	if strings.Contains(body, "PUBLISH") {
		s.sharded = newVariant("local PUBLISH = 'spublish'\n" + body)
	}
	return s
}

// Sharded is a cluster client whose servers have sharded pub/sub (Redis 7
// or later): scripts run through it publish with SPUBLISH, which Redis
// Cluster delivers within the channel's shard instead of broadcasting it to
// every node. Subscribers must then use SSUBSCRIBE.
type Sharded struct{ redis.UniversalClient }

// variantFor picks the variant matching how c's subscribers listen.
func (s script) variantFor(c any) variant {
	switch c := c.(type) {
	case Sharded:
		return s.sharded
	case *Synced:
		return s.variantFor(c.UniversalClient)
	case *Batched:
		return s.variantFor(c.UniversalClient)
	}
	return s.plain
}

// run runs s, letting go-redis retry it: for scripts that are safe to
// replay.
func (s script) run(ctx context.Context, c Client, keys []string, args ...any) *redis.Cmd {
	s.observe(ctx)
	v := s.variantFor(c)
	cmd, err := bounded(ctx, func() (*redis.Cmd, error) {
		cmd := v.Run(ctx, c, keys, args...)
		return cmd, cmd.Err()
	})
	if cmd == nil {
		return failedCmd(ctx, err)
	}
	if err != nil {
		cmd.SetErr(wrongKind(err))
	}
	return cmd
}

// evalOnce runs s by EVALSHA, falling back to EVAL when the server does not
// have it cached (NOSCRIPT means it did not run), never letting go-redis
// replay it; bounded by ctx (see WithCallBound).
func (s script) evalOnce(ctx context.Context, c Client, keys []string, args ...any) (any, error) {
	s.observe(ctx)
	v := s.variantFor(c)
	res, err := bounded(ctx, func() (any, error) { return v.evalOnce(ctx, c, keys, args) })
	return res, wrongKind(err)
}

func (v variant) evalOnce(ctx context.Context, c Client, keys []string, args []any) (any, error) {
	hash := v.Hash()
	if hash == "" {
		// Hashed by the server (FIPS mode), not loaded yet. If SCRIPT LOAD
		// fails, EVAL below still runs the script.
		_ = v.Load(ctx, c).Err()
		hash = v.Hash()
	}
	var cmd *redis.Cmd
	if hash != "" {
		cmd = redis.NewCmd(ctx, evalArgs("evalsha", hash, keys, args)...)
		_ = c.Process(ctx, onceCmd{cmd})
	}
	// Err() != nil first: HasErrorPrefix allocates even for a nil error.
	if cmd == nil || cmd.Err() != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = redis.NewCmd(ctx, evalArgs("eval", v.src, keys, args)...)
		_ = c.Process(ctx, onceCmd{cmd})
	}
	return cmd.Result()
}

// queue puts one call of s on pipe by EVALSHA (the caller handles NOSCRIPT),
// or by EVAL while a server-hashed script (FIPS mode) has no hash yet: a
// pipeline cannot wait for SCRIPT LOAD's answer.
func (s script) queue(ctx context.Context, pipe redis.Pipeliner, keys []string, args ...any) *redis.Cmd {
	s.observe(ctx)
	v := s.variantFor(pipe)
	if hash := v.Hash(); hash != "" {
		return pipe.EvalSha(ctx, hash, keys, args...)
	}
	return pipe.Eval(ctx, v.src, keys, args...)
}

func evalArgs(verb, body string, keys []string, args []any) []any {
	out := make([]any, 0, 3+len(keys)+len(args))
	out = append(out, verb, body, len(keys))
	for _, k := range keys {
		out = append(out, k)
	}
	return append(out, args...)
}

// ms renders a duration as whole milliseconds, rounding up so that a positive
// duration never becomes 0 (which Redis would read as "expire now").
func ms(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// optCount renders an optional hold count: negative means "not given".
func optCount(n int64) string {
	if n < 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// flag renders a boolean script argument: "1" or "".
func flag(b bool) string {
	if b {
		return "1"
	}
	return ""
}
