package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/internal/inspect"
	"github.com/actorlock/actorlock/scripts"
)

// listed is one line of list.
type listed struct {
	Name    string       `json:"name"`
	Kind    inspect.Kind `json:"kind,omitempty"`
	Summary string       `json:"summary"`
}

// errEnough stops the scan once --max objects are listed.
var errEnough = errors.New("enough")

// list walks the keyspace with SCAN MATCH (never KEYS, which blocks the
// server), on every master of a cluster, and shows each key that is an
// object of ours. Auxiliary keys (redisson_*, {name}:...) are not objects
// and are skipped; an object that has only auxiliary keys (a free fair
// lock with a queue) is not listed, inspect shows it.
func (c *command) list(ctx context.Context, args []string) error {
	pattern := "*"
	if len(args) == 1 {
		pattern = args[0]
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	out := []listed{} // --json prints [] when nothing matches, never null
	visit := func(ctx context.Context, node redis.UniversalClient) error {
		var cursor uint64
		for {
			sctx, cancel := c.bounded(ctx)
			keys, next, err := node.Scan(sctx, cursor, pattern, 500).Result()
			cancel()
			if err != nil {
				return err
			}
			for _, key := range keys {
				if auxiliary(key) {
					continue
				}
				l, ok, err := c.describe(ctx, key)
				if err != nil {
					return err
				}
				mu.Lock()
				if ok && !seen[key] {
					seen[key] = true
					out = append(out, l)
				}
				enough := len(out) >= c.limit
				mu.Unlock()
				if enough {
					return errEnough
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return visit(ctx, node) })
	} else {
		err = visit(ctx, c.rdb)
	}
	more := errors.Is(err, errEnough)
	if err != nil && !more {
		return fmt.Errorf("list: %w", err)
	}
	if c.json {
		return c.printJSON(out)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	for _, l := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", l.Kind, l.Name, l.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(c.stderr, "(stopped after %d objects: --max)\n", len(out))
	}
	return nil
}

// describe reads key as an object; ok is false for a key that is none
// (and --all not given).
func (c *command) describe(ctx context.Context, key string) (listed, bool, error) {
	o, err := c.read(ctx, key, 10)
	switch {
	case err == nil:
		return listed{Name: key, Kind: o.Kind, Summary: summary(o)}, true, nil
	case errors.Is(err, inspect.ErrNotFound):
		return listed{}, false, nil // gone since SCAN saw it
	case errors.Is(err, inspect.ErrNotObject), errors.Is(err, inspect.ErrWrongKind):
		return listed{Name: key, Summary: "not an actorlock/Redisson object"}, c.all, nil
	}
	return listed{}, false, err
}

// auxiliary reports whether key is one of an object's auxiliary keys
// (docs/design.md, "The Redis layout") rather than an object's own name.
func auxiliary(key string) bool {
	return strings.HasPrefix(key, "redisson_") || strings.HasPrefix(key, "actorlock_request:") ||
		strings.Contains(key, scripts.RuntimeKeyPrefix) ||
		(strings.HasPrefix(key, "{") && strings.Contains(key, "}:"))
}
