package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// How often the progress line is refreshed: redrawn in place on a terminal;
// printed as a new line otherwise, less often, so logs stay readable.
const (
	ttyRefresh   = 250 * time.Millisecond
	plainRefresh = 2 * time.Second
)

// showProgress prints the progress line until ctx ends, then once more with
// the final numbers. The returned channel closes when it has.
func showProgress(ctx context.Context, std stdio, cfg config, t *tally, start time.Time) <-chan struct{} {
	done := make(chan struct{})
	every := plainRefresh
	if std.tty {
		every = ttyRefresh
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		printed := -1 // acquisitions on the last line printed
		show := func() {
			snap := t.snapshot()
			printProgress(std, progressLine(time.Since(start), snap, cfg.unsafe))
			printed = snap.total
		}
		for {
			select {
			case <-tick.C:
				show()
			case <-ctx.Done():
				if std.tty {
					show()
					fmt.Fprintln(std.out) // keep the last line
				} else if t.snapshot().total != printed {
					show() // unless a tick has just shown the same
				}
				return
			}
		}
	}()
	return done
}

func printProgress(std stdio, line string) {
	if std.tty {
		// Carriage return and ANSI "erase line": redraw in place.
		fmt.Fprint(std.out, "\r\x1b[2K"+line)
		return
	}
	fmt.Fprintln(std.out, line)
}

func progressLine(elapsed time.Duration, s snapshot, unsafe bool) string {
	per := make([]string, len(s.perCounter))
	for c, n := range s.perCounter {
		per[c] = strconv.Itoa(n)
	}
	rate := float64(s.total) / max(elapsed.Seconds(), 1e-3)
	return fmt.Sprintf("%5.1fs  %6d acquisitions  %5.0f/s  per counter [%s]  hand-off %s",
		elapsed.Seconds(), s.total, rate, strings.Join(per, " "), handoffText(s, unsafe))
}

func handoffText(s snapshot, unsafe bool) string {
	switch {
	case unsafe:
		return "n/a (no lock)"
	case s.handoffs == 0:
		return "p50 - p99 -"
	}
	return fmt.Sprintf("p50 %s p99 %s", ms(s.p50), ms(s.p99))
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
}

// banner says what is about to run.
func banner(w io.Writer, cfg config, addr string) {
	where := "redis " + addr
	if cfg.redisAddr == "" {
		where += " (own redis-server)"
	}
	fmt.Fprintf(w, "actorlock demo: %d processes × %d owners on %d counters for %v, %s\n",
		cfg.procs, cfg.owners, cfg.counters, cfg.duration, where)
	if cfg.unsafe {
		fmt.Fprintln(w, "--unsafe: owners skip the lock, to show what it prevents; expect lost updates")
	}
}
