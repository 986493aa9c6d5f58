package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// The delayed-queue scenario, dq: how fast actorlock's mover drains a
// backlog of due items, and how late items spread over time arrive. It is
// not a comparison: the other contenders have no delayed queue.
var (
	dqBacklog = flag.Int("dq-backlog", 100_000, "dq: items already due when the mover starts")
	dqSpread  = flag.Int("dq-spread", 10_000, "dq: items whose due times are spread over -dq-over")
	dqOver    = flag.Duration("dq-over", 10*time.Second, "dq: time over which the spread items fall due")
)

type dqStats struct {
	Backlog     int
	MoveTime    time.Duration
	ItemsPerSec float64
	Spread      int
	Over        time.Duration
	P50, P99    time.Duration
	Max         time.Duration
}

// runDelayQueueBench runs both parts of dq on a fresh redis-server and
// prints one table.
func runDelayQueueBench(out, progress io.Writer) (dqStats, error) {
	st := dqStats{Backlog: *dqBacklog, Spread: *dqSpread, Over: *dqOver}
	srv, err := redisserver.Start()
	if err != nil {
		return st, err
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	defer rdb.Close()
	rt, err := actorlock.New(rdb)
	if err != nil {
		return st, err
	}
	defer rt.Close(context.Background())
	ctx := context.Background()

	// Part 1: a backlog written the way a Redisson producer writes it (its
	// members, pipelined), already due, with no mover running; then the
	// queue is opened and the time to move all of it is measured.
	fmt.Fprintf(progress, "running dq: moving a backlog of %d due items\n", st.Backlog)
	if err := loadBacklog(ctx, rdb, "bench:dq:backlog", st.Backlog); err != nil {
		return st, err
	}
	start := time.Now()
	q := rt.DelayedQueue("bench:dq:backlog")
	for {
		n, err := rdb.LLen(ctx, "bench:dq:backlog").Result()
		if err != nil {
			return st, err
		}
		if int(n) == st.Backlog {
			break
		}
		time.Sleep(time.Millisecond)
	}
	st.MoveTime = time.Since(start)
	st.ItemsPerSec = float64(st.Backlog) / st.MoveTime.Seconds()
	_ = q.Close()

	// Part 2: items offered through the API with due times spread evenly
	// over dqOver, starting 2 s ahead (time to offer them all); one Take
	// loop receives them. Lateness is arrival minus due time, Take's wake-up
	// included: what a consumer sees.
	fmt.Fprintf(progress, "running dq: %d items due over %v\n", st.Spread, st.Over)
	lateness, err := spreadLateness(ctx, rt, "bench:dq:spread", st.Spread, st.Over)
	if err != nil {
		return st, err
	}
	slices.Sort(lateness)
	st.P50, st.P99, st.Max = percentile(lateness, 0.50), percentile(lateness, 0.99), lateness[len(lateness)-1]

	fmt.Fprintf(out, "\ndq: delayed queue (actorlock's mover; Redis TIME for due times)\n")
	fmt.Fprintf(out, "%-28s %12s %12s\n", "backlog moved", "time", "items/s")
	fmt.Fprintf(out, "%-28s %12v %12.0f\n", fmt.Sprintf("%d due items", st.Backlog), st.MoveTime.Round(time.Millisecond), st.ItemsPerSec)
	fmt.Fprintf(out, "%-28s %12s %12s %12s\n", "spread items", "late p50", "late p99", "late max")
	fmt.Fprintf(out, "%-28s %12v %12v %12v\n", fmt.Sprintf("%d over %v", st.Spread, st.Over),
		st.P50.Round(10*time.Microsecond), st.P99.Round(10*time.Microsecond), st.Max.Round(10*time.Microsecond))
	return st, nil
}

// loadBacklog writes n due items of delayed queue name as Redisson does:
// member = byte 8, 8 random-ish bytes, 8-byte little-endian length, value.
func loadBacklog(ctx context.Context, rdb *redis.Client, name string, n int) error {
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return err
	}
	due := float64(now.UnixMilli() - 1)
	const batch = 1000
	for from := 0; from < n; from += batch {
		pipe := rdb.Pipeline()
		for i := from; i < min(from+batch, n); i++ {
			value := "item-" + strconv.Itoa(i)
			m := []byte{8}
			m = binary.LittleEndian.AppendUint64(m, uint64(i))
			m = binary.LittleEndian.AppendUint64(m, uint64(len(value)))
			m = append(m, value...)
			pipe.ZAdd(ctx, "redisson_delay_queue_timeout:{"+name+"}", redis.Z{Score: due, Member: m})
			pipe.RPush(ctx, "redisson_delay_queue:{"+name+"}", m)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

func spreadLateness(ctx context.Context, rt *actorlock.Runtime, name string, n int, over time.Duration) ([]time.Duration, error) {
	q := rt.DelayedQueue(name)
	defer q.Close()
	first := time.Now().Add(2 * time.Second)
	step := over / time.Duration(n)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				due := first.Add(time.Duration(i) * step)
				payload := strconv.FormatInt(due.UnixNano(), 10)
				if err := q.Offer(ctx, []byte(payload), max(time.Until(due), 0)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	if time.Now().After(first) {
		return nil, fmt.Errorf("offering %d items took past the first due time", n)
	}
	bq := rt.BlockingQueue(name)
	lateness := make([]time.Duration, 0, n)
	tctx, cancel := context.WithTimeout(ctx, over+30*time.Second)
	defer cancel()
	for range n {
		v, err := bq.Take(tctx)
		if err != nil {
			return nil, err
		}
		arrived := time.Now()
		ns, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return nil, err
		}
		lateness = append(lateness, arrived.Sub(time.Unix(0, ns)))
	}
	return lateness, nil
}
