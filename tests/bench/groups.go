package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// The groups scenario: uncontended acquire+release latency of a MultiLock
// of 3 locks on 3 servers and of a RedLock over 5 servers, beside redsync's
// RedLock over the same 5 servers, one goroutine each, one after another.
func runGroupsBench(out, progress io.Writer, d time.Duration) error {
	var rdbs []*redis.Client
	var rts []*actorlock.Runtime
	var pools []redsyncredis.Pool
	for range 5 {
		srv, err := redisserver.Start()
		if err != nil {
			return err
		}
		defer srv.Close()
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer rdb.Close()
		rt, err := actorlock.New(rdb)
		if err != nil {
			return err
		}
		defer rt.Close(context.Background())
		rdbs, rts = append(rdbs, rdb), append(rts, rt)
		pools = append(pools, redsyncgoredis.NewPool(rdb))
	}
	ctx := context.Background()
	locks := func(n int) []*actorlock.Lock {
		var ls []*actorlock.Lock
		for _, rt := range rts[:n] {
			ls = append(ls, rt.Lock("bench-group"))
		}
		return ls
	}
	multi := actorlock.MultiLock(locks(3)...)
	red := actorlock.RedLock(locks(5)...)
	rs := redsync.New(pools...).NewMutex("bench-redsync")
	rows := []struct {
		name  string
		cycle func() error
	}{
		{"actorlock MultiLock (3 servers)", func() error {
			g, err := multi.Acquire(ctx)
			if err != nil {
				return err
			}
			return g.Unlock(ctx)
		}},
		{"actorlock RedLock (5 servers)", func() error {
			g, err := red.Acquire(ctx)
			if err != nil {
				return err
			}
			return g.Unlock(ctx)
		}},
		{"redsync RedLock (5 servers)", func() error {
			if err := rs.LockContext(ctx); err != nil {
				return err
			}
			_, err := rs.UnlockContext(ctx)
			return err
		}},
	}
	fmt.Fprintf(out, "\n(groups) uncontended acquire+release, 1 goroutine, %v per contender\n", d)
	tw := newTable(out)
	fmt.Fprintln(tw, "contender\tops/s\tp50\tp99")
	for _, row := range rows {
		fmt.Fprintf(progress, "running groups: %s (%v)\n", row.name, d)
		var lat []time.Duration
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			start := time.Now()
			if err := row.cycle(); err != nil {
				return fmt.Errorf("%s: %w", row.name, err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		fmt.Fprintf(tw, "%s\t%.0f\t%v\t%v\n", row.name, float64(len(lat))/d.Seconds(),
			fmtDur(percentile(lat, 0.5)), fmtDur(percentile(lat, 0.99)))
	}
	return tw.Flush()
}
