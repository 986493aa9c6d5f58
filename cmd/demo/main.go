// Command demo shows actorlock keeping shared counters consistent while
// owners in several processes contend for them.
//
// Usage:
//
//	go run ./cmd/demo [--redis ADDR] [--procs 3] [--owners 4] [--counters 4] [--duration 10s]
//
// Without --redis it starts its own redis-server on a free loopback port and
// stops it at the end. The process re-executes itself as --procs - 1 worker
// processes and runs --owners owners itself. Every owner, each its own lock
// owner, repeatedly picks one of the counters ("accounts") at random, takes
// that counter's lock and increments it with a deliberately non-atomic GET,
// sleep, SET in Redis, which loses updates unless the lock excludes. Every
// critical section is recorded; workers stream theirs to the parent as JSON
// lines on stdout, and the parent shows live progress.
//
// At the end (or on Ctrl-C) the demo checks the record against Redis: each
// counter equals the number of critical sections on it, no two sections on a
// counter overlap in time, and fencing tokens strictly increase in section
// order. It prints the verdict and exits 0 if all of it holds, 1 if not, 2 if
// it could not run at all (no redis-server, bad flags).
//
// Hidden flags, left out of -h:
//
//	--unsafe     owners skip the lock, for showing what the lock prevents:
//	             updates get lost and the verdict fails. A plain INCR per
//	             counter stands in for the fencing token.
//	--worker N   internal: run as worker process N.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Exit codes.
const (
	exitPass  = 0 // every check held
	exitFail  = 1 // a check failed, or the run broke
	exitSetup = 2 // could not run: bad flags, no redis-server
)

type config struct {
	redisAddr string
	procs     int
	owners    int
	counters  int
	duration  time.Duration
	hold      time.Duration
	wait      time.Duration
	unsafe    bool

	worker int // > 0: run as this worker process
}

// stdio is where a run reads and writes; main passes the process's own.
type stdio struct {
	in  io.Reader
	out io.Writer
	err io.Writer
	tty bool // out is a terminal: redraw the progress line in place
}

func main() {
	// go-redis logs failed dials to stderr by itself; the demo reports the
	// errors its calls return, once.
	redis.SetLogger(discardLogger{})
	std := stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr, tty: isTerminal(os.Stdout)}
	os.Exit(run(context.Background(), os.Args[1:], std))
}

func run(ctx context.Context, args []string, std stdio) int {
	cfg, err := parseFlags(args, std.err)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitPass
	case err != nil:
		return exitSetup
	case cfg.worker > 0:
		return runWorker(ctx, cfg, std)
	}
	return runParent(ctx, cfg, std)
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// isTerminal reports whether f is a character device, which is how a
// terminal shows up; no dependency needed for that.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.redisAddr, "redis", "", "use the Redis at `ADDR` (default: start a redis-server of its own)")
	fs.IntVar(&cfg.procs, "procs", 3, "processes contending, this one included")
	fs.IntVar(&cfg.owners, "owners", 4, "lock owners per process")
	fs.IntVar(&cfg.counters, "counters", 4, "shared counters, each with its own lock")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long the owners contend")
	fs.DurationVar(&cfg.hold, "hold", 200*time.Microsecond, "sleep between GET and SET, which widens the race window")
	fs.DurationVar(&cfg.wait, "wait", 5*time.Second, "WaitTime of each acquisition")
	fs.BoolVar(&cfg.unsafe, "unsafe", false, "skip the lock, for showing what the lock prevents")
	fs.IntVar(&cfg.worker, "worker", 0, "internal: run as worker process `N`")
	// Left out of the usage text; the package comment describes them.
	hidden := map[string]bool{"unsafe": true, "worker": true}
	fs.Usage = func() { usage(fs, hidden) }
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		fs.Usage()
		return cfg, err
	}
	return cfg, nil
}

func (c config) validate() error {
	switch {
	case c.procs < 1, c.owners < 1, c.counters < 1:
		return errors.New("--procs, --owners and --counters must be at least 1")
	case c.duration <= 0:
		return errors.New("--duration must be positive")
	case c.hold < 0, c.wait < 0:
		return errors.New("--hold and --wait must not be negative")
	}
	return nil
}

func usage(fs *flag.FlagSet, hidden map[string]bool) {
	w := fs.Output()
	fmt.Fprintln(w, "Usage: demo [flags]\n\nOwners in several processes increment shared counters in Redis under actorlock's locks; the demo then checks that no update was lost.\n\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		if hidden[f.Name] {
			return
		}
		arg, help := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s %s\n    \t%s", f.Name, arg, help)
		if !strings.Contains(help, "default") {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}
