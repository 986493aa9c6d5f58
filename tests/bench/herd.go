package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// runHerdBench: n goroutines of one process, each its own owner, queue on
// one lock that a first goroutine holds, and are released at once: how long
// until every one of them has held it and let go, how many lock scripts
// Redis ran per grant, and how many subscriptions the waiting took (the
// holder is local, so its local waiters need none).
func runHerdBench(out, progress io.Writer, n int) error {
	b, err := newLocksBench()
	if err != nil {
		return err
	}
	defer b.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fmt.Fprintf(progress, "running herd: %d goroutines queued on one lock\n", n)
	first, err := b.rt.Lock("bench-herd").Acquire(ctx)
	if err != nil {
		return err
	}
	before, err := readCmdStats(ctx, b.admin)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	queued := make(chan struct{}, n)
	for range n {
		l := b.rt.Lock("bench-herd")
		wg.Go(func() {
			queued <- struct{}{}
			h, err := l.Acquire(ctx)
			if err == nil {
				err = h.Unlock(ctx)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	for range n {
		<-queued
	}
	// Let the last of them reach the lock actor's queue (one still on its
	// way when the clock starts would only make the figure worse).
	time.Sleep(time.Second)
	subs, err := b.admin.PubSubNumSub(ctx, "redisson_lock__channel:{bench-herd}").Result()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := first.Unlock(ctx); err != nil {
		return err
	}
	wg.Wait()
	served := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	after, err := readCmdStats(ctx, b.admin)
	if err != nil {
		return err
	}
	delta := after.sub(before)
	scripts := delta["evalsha"] + delta["eval"]
	fmt.Fprintf(out, "\n(herd) %d goroutines queued on one lock in one process, released at once\n", n)
	tw := newTable(out)
	fmt.Fprintln(tw, "all served in\tgrants/s\tscript calls/grant\tsubscriptions while queued")
	fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%d\n", fmtDur(served), float64(n)/served.Seconds(),
		float64(scripts)/float64(n), subs["redisson_lock__channel:{bench-herd}"])
	return tw.Flush()
}
