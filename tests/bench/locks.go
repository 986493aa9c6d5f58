package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// The fair and rw scenarios measure actorlock's fair lock and read-write
// lock alone (the peers have neither): 32 local fair waiters on one name,
// and 32 readers + 4 writers on one read-write lock.

type lockEvent struct {
	who                int
	write              bool
	called, acq, until time.Time
}

// lockLoop runs workers for d: each acquires via acquire(i), spins spin,
// and unlocks, recording every acquisition.
func lockLoop(ctx context.Context, workers int, d, spin time.Duration, acquire func(i int) (*actorlock.Held, bool, error)) ([]lockEvent, error) {
	var mu sync.Mutex
	var events []lockEvent
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	end := time.Now().Add(d)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				called := time.Now()
				h, write, err := acquire(i)
				if err != nil {
					errs <- err
					return
				}
				acq := time.Now()
				for time.Since(acq) < spin {
				}
				until := time.Now()
				if err := h.Unlock(ctx); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				events = append(events, lockEvent{who: i, write: write, called: called, acq: acq, until: until})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return events, <-errs
}

// handoffGaps are the times from a holder's unlock to the next holder's
// acquisition, where the holder changed.
func handoffGaps(events []lockEvent) []time.Duration {
	s := slices.Clone(events)
	slices.SortFunc(s, func(x, y lockEvent) int { return x.acq.Compare(y.acq) })
	var gaps []time.Duration
	for i := 1; i < len(s); i++ {
		if s[i].who != s[i-1].who {
			gaps = append(gaps, max(s[i].acq.Sub(s[i-1].until), 0))
		}
	}
	slices.Sort(gaps)
	return gaps
}

// locksBench is a fresh Redis, a counted client and a runtime on it.
type locksBench struct {
	srv     *redisserver.Server
	rdb     *redis.Client
	admin   *redis.Client
	counter *cmdCounter
	rt      *actorlock.Runtime
}

func newLocksBench() (*locksBench, error) {
	srv, err := redisserver.Start()
	if err != nil {
		return nil, err
	}
	b := &locksBench{srv: srv, counter: &cmdCounter{}}
	b.rdb = redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.rdb.AddHook(b.counter)
	b.admin = redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.rt, err = actorlock.New(b.rdb)
	if err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *locksBench) close() {
	if b.rt != nil {
		_ = b.rt.Close(context.Background())
	}
	_ = b.rdb.Close()
	_ = b.admin.Close()
	_ = b.srv.Close()
}

// runFairBench: 32 goroutines, each its own owner, take turns on one fair
// lock in this process.
func runFairBench(out, progress io.Writer, d, spin time.Duration, workers int) error {
	b, err := newLocksBench()
	if err != nil {
		return err
	}
	defer b.close()
	ctx := context.Background()
	fmt.Fprintf(progress, "running fair: %d local waiters on one fair lock (%v)\n", workers, d)
	before, err := readCmdStats(ctx, b.admin)
	if err != nil {
		return err
	}
	// Subscriptions are sampled while the waiters wait.
	subs := make(chan string, 1)
	go func() {
		time.Sleep(d / 2)
		ch, _ := b.admin.PubSubChannels(ctx, "redisson_lock__channel:{bench-fair}*").Result()
		pat, _ := b.admin.PubSubNumPat(ctx).Result()
		subs <- fmt.Sprintf("%d channels, %d patterns", len(ch), pat)
	}()
	locks := make([]*actorlock.Lock, workers)
	for i := range locks {
		locks[i] = b.rt.FairLock("bench-fair")
	}
	events, err := lockLoop(ctx, workers, d, spin, func(i int) (*actorlock.Held, bool, error) {
		h, err := locks[i].Acquire(ctx)
		return h, false, err
	})
	if err != nil {
		return err
	}
	after, err := readCmdStats(ctx, b.admin)
	if err != nil {
		return err
	}
	delta := after.sub(before)
	gaps := handoffGaps(events)
	per := make([]int, workers)
	for _, e := range events {
		per[e.who]++
	}
	n := len(events)
	fmt.Fprintf(out, "\n(fair) %d local waiters, one fair lock, critical section %v busy-spin, %v\n", workers, spin, d)
	tw := newTable(out)
	fmt.Fprintln(tw, "acq/s\thand-off gap p50\tp99\tacq/gor min-max\tclient cmds/acq\tserver cmds/acq\tsubscriptions while waiting")
	fmt.Fprintf(tw, "%.0f\t%v\t%v\t%d-%d\t%.2f\t%.2f\t%s\n",
		float64(n)/d.Seconds(), fmtDur(percentile(gaps, 0.5)), fmtDur(percentile(gaps, 0.99)),
		slices.Min(per), slices.Max(per),
		perAcq(b.counter.n.Load()+delta.pubsub(), n), perAcq(delta.total(), n), <-subs)
	return tw.Flush()
}

// runRWBench: readers and writers, each its own owner, on one read-write
// lock in this process.
func runRWBench(out, progress io.Writer, d, spin time.Duration, readers, writers int) error {
	b, err := newLocksBench()
	if err != nil {
		return err
	}
	defer b.close()
	ctx := context.Background()
	fmt.Fprintf(progress, "running rw: %d readers + %d writers on one read-write lock (%v)\n", readers, writers, d)
	locks := make([]*actorlock.ReadWriteLock, readers+writers)
	for i := range locks {
		locks[i] = b.rt.ReadWriteLock("bench-rw")
	}
	events, err := lockLoop(ctx, readers+writers, d, spin, func(i int) (*actorlock.Held, bool, error) {
		if i < readers {
			h, err := locks[i].ReadLocker().Acquire(ctx)
			return h, false, err
		}
		h, err := locks[i].WriteLocker().Acquire(ctx)
		return h, true, err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n(rw) %d readers + %d writers, one read-write lock, critical section %v busy-spin, %v\n", readers, writers, spin, d)
	tw := newTable(out)
	fmt.Fprintln(tw, "mode\tacq/s\twait p50\twait p99\tacq/gor min-max")
	for _, write := range []bool{false, true} {
		var waits []time.Duration
		per := map[int]int{}
		for _, e := range events {
			if e.write == write {
				waits = append(waits, e.acq.Sub(e.called))
				per[e.who]++
			}
		}
		slices.Sort(waits)
		counts := slices.Collect(maps.Values(per))
		mode := map[bool]string{false: "read", true: "write"}[write]
		if len(counts) == 0 {
			fmt.Fprintf(tw, "%s\t0\t-\t-\t-\n", mode)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%v\t%v\t%d-%d\n", mode, float64(len(waits))/d.Seconds(),
			fmtDur(percentile(waits, 0.5)), fmtDur(percentile(waits, 0.99)), slices.Min(counts), slices.Max(counts))
	}
	return tw.Flush()
}
