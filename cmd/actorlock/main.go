// Command actorlock shows and repairs actorlock's (and Redisson's) locks,
// semaphores, latches and queues in a Redis, for operators:
//
//	actorlock [flags] inspect NAME        what NAME is, who holds it, who waits
//	actorlock [flags] list [PATTERN]      objects whose name matches (SCAN, never KEYS)
//	actorlock [flags] watch NAME          live view of holders and waiters
//	actorlock [flags] force-unlock NAME   delete a lock whoever holds it (needs --yes)
//	actorlock [flags] fair-drop NAME OWNER...  drop dead waiters of a fair lock (needs --yes)
//	actorlock [flags] queue stats NAME    a delayed queue's backlog
//
// Redis is given with --url (or ACTORLOCK_URL, which keeps the password
// out of the process list) as redis://[user:password@]host:port[/db],
// rediss:// for TLS (--cacert, --cert, --key as redis-cli's), with --cluster
// for a Redis Cluster or --sentinel-master NAME for Sentinel. The password
// is never printed. Exit status: 0 done, 1 failed (Redis unreachable or
// refused the password, the name is no lock, force-unlock without --yes,
// ...), 2 bad command line or URL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quiet keeps go-redis from logging each failed dial: the command reports
// what went wrong itself, once.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

const usage = `usage: actorlock [flags] COMMAND [flags] ARGS

commands:
  inspect NAME         what NAME is (kind from its layout), holders, TTL, queue, token
  list [PATTERN]       objects whose name matches PATTERN (glob, default *)
  watch NAME           live holders and waiters (Ctrl-C or --for to stop)
  force-unlock NAME    delete a lock whoever holds it and wake its waiters (needs --yes)
  fair-drop NAME [OWNER...]
                       take dead waiters (OWNERs, or --all) out of a fair lock's queue (needs --yes)
  queue stats NAME     a delayed queue: delayed items, next due, ready items

flags (before or after the command, before its arguments):
`

// globals are the flags every command takes.
type globals struct {
	target
	timeout time.Duration
	json    bool
}

// register adds the global flags to fs; jsonHelp describes --json for its
// command ("": the command has no JSON output, and no --json flag).
func (g *globals) register(fs *flag.FlagSet, jsonHelp string) {
	fs.Var(secretString{&g.url}, "url", "Redis `URL`: redis://[user:password@]host:port[/db], rediss:// for TLS (default $ACTORLOCK_URL)")
	fs.BoolVar(&g.cluster, "cluster", g.cluster, "Redis Cluster: --url names a node (more with ?addr=host:port)")
	fs.StringVar(&g.sentinelMaster, "sentinel-master", g.sentinelMaster, "Sentinel: the master's `name`; --url names a Sentinel (more with ?addr=host:port, the master's password as ?password=)")
	fs.StringVar(&g.caCert, "cacert", g.caCert, "rediss://: PEM `file` of a CA to trust besides the system's")
	fs.StringVar(&g.cert, "cert", g.cert, "rediss://: PEM `file` of a client certificate, for servers that ask for one (with --key)")
	fs.StringVar(&g.key, "key", g.key, "rediss://: PEM `file` of the client certificate's key")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "bound on connecting and on each read")
	if jsonHelp != "" {
		fs.BoolVar(&g.json, "json", g.json, jsonHelp)
	}
}

// synopses are the commands' --help headings.
var synopses = map[string]string{
	"inspect":      "inspect [flags] NAME\n  what NAME is (kind from its layout), holders, TTL, queue, token",
	"list":         "list [flags] [PATTERN]\n  objects whose name matches PATTERN (glob, default *), found with SCAN",
	"watch":        "watch [flags] NAME\n  live holders and waiters: redrawn in place on a terminal, else a line per change (Ctrl-C or --for to stop)",
	"force-unlock": "force-unlock [flags] NAME\n  delete a lock whoever holds it and wake its waiters (needs --yes)",
	"queue stats":  "queue stats [flags] NAME\n  a delayed queue: delayed items, next due, ready items",
}

// jsonHelp is what --json does for each command that has it.
var jsonHelp = map[string]string{
	"":            "print JSON instead of text (inspect, list, queue stats)",
	"inspect":     "print the object as JSON",
	"list":        "print the objects as a JSON array ([] when none matches)",
	"queue stats": "print the queue's figures as JSON",
}

// secretString is a flag whose value is never shown (usage messages print
// a flag's default, which here may hold a password).
type secretString struct{ p *string }

func (s secretString) String() string { return "" }

func (s secretString) Set(v string) error {
	*s.p = v
	return nil
}

// run is the whole command, testable: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	redis.SetLogger(quiet{})
	// Each command's flag set registers these again, defaulting to what
	// the flags before the command said.
	g := &globals{timeout: 5 * time.Second}
	top := flag.NewFlagSet("actorlock", flag.ContinueOnError)
	top.SetOutput(stderr)
	g.register(top, jsonHelp[""])
	top.Usage = func() {
		fmt.Fprint(stderr, usage)
		top.PrintDefaults()
	}
	if err := top.Parse(args); err != nil {
		return exitCode(stderr, err)
	}
	args = top.Args()
	if len(args) == 0 {
		top.Usage()
		return 2
	}
	cmd, args := args[0], args[1:]
	if cmd == "queue" {
		if len(args) == 0 || args[0] != "stats" {
			return fail(stderr, usageError{"usage: actorlock queue stats NAME"})
		}
		cmd, args = "queue stats", args[1:]
	}
	c := &command{globals: g, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("actorlock "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	g.register(fs, jsonHelp[cmd])
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: actorlock %s\n\nflags:\n", synopses[cmd])
		fs.PrintDefaults()
	}
	var exec func(context.Context, []string) error
	switch cmd {
	case "inspect":
		fs.Func("kind", "read NAME as this `kind` instead of detecting it (a semaphore and a latch look alike)", c.setKind)
		fs.IntVar(&c.limit, "limit", 100, "most waiters, permits or read holds listed")
		exec = c.inspect
	case "list":
		fs.IntVar(&c.limit, "max", 1000, "stop after listing this many objects")
		fs.BoolVar(&c.all, "all", false, "also list keys that are no actorlock/Redisson object")
		exec = c.list
	case "watch":
		fs.Func("kind", "read NAME as this `kind` instead of detecting it", c.setKind)
		fs.IntVar(&c.limit, "limit", 20, "most waiters, permits or read holds shown")
		fs.DurationVar(&c.interval, "interval", 500*time.Millisecond, "how often to re-read (an unlock message re-reads at once)")
		fs.DurationVar(&c.watchFor, "for", 0, "stop after this long (0: on Ctrl-C only)")
		exec = c.watch
	case "force-unlock":
		fs.BoolVar(&c.yes, "yes", false, "really delete the lock (without it, only say what would be deleted)")
		exec = c.forceUnlock
	case "fair-drop":
		fs.BoolVar(&c.yes, "yes", false, "really drop the waiters (without it, only show the queue)")
		fs.BoolVar(&c.all, "all", false, "drop every waiter")
		fs.IntVar(&c.limit, "limit", 1000, "most waiters read (--all refuses a longer queue)")
		exec = c.fairDrop
	case "queue stats":
		exec = c.queueStats
	default:
		return fail(stderr, usageError{fmt.Sprintf("unknown command %q (want inspect, list, watch, force-unlock, fair-drop or queue stats)", cmd)})
	}
	if err := fs.Parse(args); err != nil {
		return exitCode(stderr, err)
	}
	if g.json && jsonHelp[cmd] == "" {
		return fail(stderr, usageError{fmt.Sprintf("%s has no JSON output: --json is for inspect, list and queue stats", cmd)})
	}
	if err := c.checkArgs(cmd, fs.Args()); err != nil {
		return fail(stderr, err)
	}
	if c.interval <= 0 && cmd == "watch" {
		return fail(stderr, usageError{"--interval must be positive"})
	}
	if g.timeout <= 0 {
		return fail(stderr, usageError{"--timeout must be positive"})
	}
	if g.url == "" {
		g.url, g.urlFrom = os.Getenv("ACTORLOCK_URL"), "ACTORLOCK_URL"
	}
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	rdb, err := connect(cctx, g.target)
	cancel()
	if err != nil {
		return fail(stderr, err)
	}
	defer rdb.Close()
	c.rdb = rdb
	return fail(stderr, exec(ctx, fs.Args()))
}

// exitCode reports a flag parsing error (flag has printed it already).
func exitCode(stderr io.Writer, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// fail prints err, if any, and returns the exit status it calls for.
func fail(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "actorlock:", err)
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}
