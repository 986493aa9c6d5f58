package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/actorlock/actorlock/internal/inspect"
	"github.com/actorlock/actorlock/scripts"
)

// watch shows name live until ctx ends (Ctrl-C) or --for is over. On a
// terminal it redraws one view in place; otherwise it prints a line each
// time holders, waiters or counts change. It re-reads every --interval,
// and at once when an unlock or release message is published (acquiring
// publishes nothing, hence the polling).
func (c *command) watch(ctx context.Context, args []string) error {
	name := args[0]
	if c.watchFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.watchFor)
		defer cancel()
	}
	wake, stop := c.wakeOnMessages(ctx, name)
	defer stop()
	ticker := time.NewTicker(c.interval)
	defer ticker.Stop()

	tty := isTerminal(c.stdout)
	var last string
	drawn := 0 // lines of the view on screen
	for first := true; ; first = false {
		o, err := c.read(ctx, name, c.limit)
		if ctx.Err() != nil {
			return nil
		}
		var view string
		switch {
		case err == nil:
			if tty {
				view = render(o, true)
			} else {
				view = summary(o)
			}
		case errors.Is(err, inspect.ErrNotFound):
			view = "nothing stored under this name (free)"
			if tty {
				view += "\n"
			}
		case first || errors.Is(err, inspect.ErrNotObject) || errors.Is(err, inspect.ErrWrongKind):
			return err
		default:
			// Redis may come back: keep watching, say why the view is old.
			view = "error: " + err.Error()
			if tty {
				view += "\n"
			}
		}
		now := time.Now().UTC().Format("15:04:05.000Z")
		if tty {
			if drawn > 0 {
				fmt.Fprintf(c.stdout, "\x1b[%dF\x1b[J", drawn) // to the view's first line, clear below
			}
			frame := fmt.Sprintf("actorlock watch %s  %s  (Ctrl-C to stop)\n%s", name, now, view)
			io.WriteString(c.stdout, frame)
			drawn = strings.Count(frame, "\n")
		} else if view != last {
			fmt.Fprintf(c.stdout, "%s %s\n", now, view)
			last = view
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-wake:
		}
	}
}

// wakeOnMessages subscribes to every channel on which name's kinds announce
// a release, and signals wake on each message; stop ends the subscription
// and its goroutine. On a cluster with sharded pub/sub, messages are not
// heard this way and the polling alone keeps the view current.
func (c *command) wakeOnMessages(ctx context.Context, name string) (wake <-chan struct{}, stop func()) {
	w := make(chan struct{}, 1)
	ps := c.rdb.Subscribe(ctx, scripts.LockChannel(name), scripts.RWChannel(name),
		scripts.SemaphoreChannel(name), scripts.LatchChannel(name), scripts.DelayChannel(name))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range ps.Channel() {
			select {
			case w <- struct{}{}:
			default:
			}
		}
	}()
	return w, func() {
		_ = ps.Close()
		wg.Wait()
	}
}

// isTerminal reports whether w is a terminal that understands ANSI
// cursor movement.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
