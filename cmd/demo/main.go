// Command demo runs a small cluster of actorlock nodes against Redis and
// checks, at the end, that the locks kept their promises.
//
// Usage:
//
//	go run ./cmd/demo [--nodes 3] [--duration 20s] [--lease 3s] [--kill=true]
//	                  [--redis-cluster | --redis ADDR[,ADDR...]] [--report FILE.html]
//
// Without --redis it starts its own Redis: one redis-server on a free
// loopback port, or a 3-master Redis Cluster with --redis-cluster, and stops
// it at the end. --redis uses servers you have: one address (a cluster node
// is recognised by INFO cluster's cluster_enabled) or several (the seed list
// of a cluster).
//
// The process is the orchestrator. It seeds the data, then re-executes
// itself as --nodes node processes. Each node makes one actorlock runtime
// that serves actors of the others over protoactor remote (loopback, a free
// port), with a short watchdog lease (--lease), and runs this workload:
//
//   - bank transfers between accounts (fields of one Redis hash) under a
//     MultiLock of both accounts' locks; the balances are read, then
//     written a little later, so only the locks keep the total constant;
//   - a job runner on fair locks acquired over remote: the node's owner
//     actors send AcquireRequests to the next live node's runtime, keep the
//     lock alive with a keeper, and increment the job's counter the racy way;
//   - readers and writers of a shared configuration under a read-write
//     lock; writers update its fields one command at a time, so a reader
//     that got in with a writer would see a torn version;
//   - delayed jobs offered through a delayed queue and taken from its
//     blocking queue by consumers on the other nodes;
//   - the leader lock, taken by the last node at start; at half time that
//     node is SIGKILLed (--kill=false: it lets go instead) and a survivor
//     takes the lock over once the lease runs out.
//
// Nodes report every critical section (lock, fencing token, start and end)
// and every queue item as JSON lines on stdout; the orchestrator shows live
// progress and ends with figures and a verdict: the total balance is
// conserved, no two critical sections of one lock overlapped (checked in
// fencing-token order), tokens increase with time, no job update was lost,
// no configuration read was torn, every delayed job was delivered exactly
// once, and the leader lock was taken over. Exit status 0 if all of it
// held, 1 if not, 2 if the demo could not run (bad flags, no redis-server).
//
// --report FILE.html also writes the run as one self-contained page (inline
// SVG, no scripts, no external assets): per lock a timeline of critical
// sections coloured by node with the kill marked, the hand-off latency and
// delayed-job lateness histograms, per-node throughput over time and the
// verdict table.
//
// Hidden flags, left out of -h:
//
//	--unsafe     nodes skip the locks, to show what they prevent: the
//	             verdict fails. An INCR per lock stands in for the token.
//	--node N     internal: run as node N (with --node-redis and so on).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	nodes        int
	duration     time.Duration
	lease        time.Duration
	kill         bool
	redis        string // --redis: comma-separated addresses
	redisCluster bool   // start a cluster of our own
	accounts     int
	jobs         int
	unsafe       bool
	report       string // --report: write the HTML report here

	// Node processes only.
	node        int    // >= 0: run as this node
	nodeCluster bool   // the addresses in redis are a cluster's
	seed        string // random seed prefix for ids (the run id)
}

// stdio is where a run reads and writes; main passes the process's own.
type stdio struct {
	in  io.Reader
	out io.Writer
	err io.Writer
	tty bool // out is a terminal: redraw the progress in place
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
	case cfg.node >= 0:
		return runNode(ctx, cfg, std)
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
	fs.IntVar(&cfg.nodes, "nodes", 3, "node processes (2 to 16); the last one is the victim of --kill")
	fs.DurationVar(&cfg.duration, "duration", 20*time.Second, "how long the workload runs")
	fs.DurationVar(&cfg.lease, "lease", 3*time.Second, "watchdog lease of every lock: a dead node's locks are free after it")
	fs.BoolVar(&cfg.kill, "kill", true, "SIGKILL the last node at half time (false: it releases the leader lock instead)")
	fs.StringVar(&cfg.redis, "redis", "", "use the Redis at `ADDR` (several, comma-separated: a cluster's seed list) instead of starting one")
	fs.BoolVar(&cfg.redisCluster, "redis-cluster", false, "start a 3-master Redis Cluster instead of a single redis-server")
	fs.IntVar(&cfg.accounts, "accounts", 8, "bank accounts (2 to 64)")
	fs.IntVar(&cfg.jobs, "jobs", 4, "fair-locked jobs (1 to 64)")
	fs.StringVar(&cfg.report, "report", "", "also write the run as a self-contained HTML page (timelines, histograms, verdict) to `FILE.html`")
	fs.BoolVar(&cfg.unsafe, "unsafe", false, "skip the locks, to show what they prevent")
	fs.IntVar(&maxBars, "report-max-bars", maxBars, "draw sections one by one up to this many bars")
	fs.IntVar(&cfg.node, "node", -1, "internal: run as node `N`")
	fs.BoolVar(&cfg.nodeCluster, "node-cluster", false, "internal: --redis is a cluster")
	fs.StringVar(&cfg.seed, "node-run", "", "internal: run id")
	hidden := map[string]bool{"unsafe": true, "report-max-bars": true, "node": true, "node-cluster": true, "node-run": true}
	fs.Usage = func() { usage(fs, hidden) }
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments: %q", fs.Args())
		fmt.Fprintln(stderr, "demo:", err)
		fs.Usage()
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
	case c.nodes < 2 || c.nodes > 16:
		return errors.New("--nodes must be from 2 to 16")
	case c.duration <= 0:
		return errors.New("--duration must be positive")
	case c.lease < 300*time.Millisecond:
		return errors.New("--lease must be at least 300ms")
	case c.accounts < 2 || c.accounts > 64:
		return errors.New("--accounts must be from 2 to 64")
	case c.jobs < 1 || c.jobs > 64:
		return errors.New("--jobs must be from 1 to 64")
	case c.redis != "" && c.redisCluster:
		return errors.New("--redis and --redis-cluster exclude each other (--redis with a cluster node or seed list uses that cluster)")
	case c.node >= c.nodes:
		return errors.New("--node must be below --nodes")
	}
	if c.report != "" {
		// Found out now rather than after the whole run.
		if fi, err := os.Stat(filepath.Dir(c.report)); err != nil || !fi.IsDir() {
			return fmt.Errorf("--report %q: its directory does not exist", c.report)
		}
	}
	for _, a := range splitAddrs(c.redis) {
		if !strings.Contains(a, ":") {
			return fmt.Errorf("--redis %q: want host:port", a)
		}
	}
	return nil
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func usage(fs *flag.FlagSet, hidden map[string]bool) {
	w := fs.Output()
	fmt.Fprintln(w, "Usage: demo [flags]\n\n"+
		"Runs a cluster of actorlock nodes (processes talking over protoactor remote) on Redis:\n"+
		"bank transfers under MultiLock, a fair-lock job runner over remote, readers and writers\n"+
		"under a read-write lock, delayed jobs; kills a node at half time; then checks the\n"+
		"invariants and prints a verdict (exit 0 pass, 1 fail, 2 could not run).\n\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		if hidden[f.Name] {
			return
		}
		arg, help := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s %s\n    \t%s", f.Name, arg, help)
		if !strings.Contains(help, "default") && f.DefValue != "" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}
