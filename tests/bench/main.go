// Command bench compares actorlock with go-redsync/redsync, bsm/redislock and
// a hand-written SET NX + pub/sub baseline, on one fresh local redis-server
// that it starts itself. See README.md for the scenarios and what each
// number means.
//
// It lives in a module of its own so that actorlock's users do not inherit
// its peers as dependencies.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
)

func main() {
	if _, child, _ := childJobFromEnv(); child {
		os.Exit(childMain())
	}
	os.Exit(run())
}

// run is main without os.Exit, so that deferred calls run.
func run() int {
	d := defaultOptions()
	scenarios := flag.String("scenarios", strings.Join(d.Scenarios, ","), "comma-separated scenarios to run: a1, a32, b, c; actorlock only: fair, rw, herd (10,000 goroutines queued on one lock), dq (delayed queue); groups (MultiLock, RedLock vs redsync's RedLock)")
	contenders := flag.String("contenders", strings.Join(d.Contenders, ","), "comma-separated contenders, in print order")
	flag.DurationVar(&d.Duration, "duration", d.Duration, "length of each uncontended run (a1, a32)")
	flag.DurationVar(&d.ContendedDuration, "contended-duration", d.ContendedDuration, "length of each contended run (b, c)")
	flag.DurationVar(&d.Spin, "spin", d.Spin, "critical section of the contended runs (busy-spin)")
	flag.IntVar(&d.Goroutines, "goroutines", d.Goroutines, "goroutines of a32 and b")
	flag.IntVar(&d.Procs, "procs", d.Procs, "processes of c")
	flag.IntVar(&d.PerProc, "per-proc", d.PerProc, "goroutines per process of c")
	cpuProfile := flag.String("cpuprofile", "", "write this process's CPU profile to `file` (the child processes of c are not profiled)")
	memProfile := flag.String("memprofile", "", "write this process's allocation profile to `file` at the end (every allocation sampled)")
	traceFile := flag.String("trace", "", "write this process's execution trace to `file`, for go tool trace (the child processes of c are not traced)")
	flag.Parse()
	d.Scenarios = splitList(*scenarios)
	// dq (delayqueue.go), fair and rw (locks.go) measure actorlock alone,
	// outside the comparison: the peers have no such primitives.
	alone := map[string]bool{}
	d.Scenarios = slices.DeleteFunc(d.Scenarios, func(s string) bool {
		alone[s] = s == "dq" || s == "fair" || s == "rw" || s == "groups" || s == "herd"
		return alone[s]
	})
	d.Contenders = splitList(*contenders)
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer stop()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 1
		defer writeMemProfile(*memProfile)
	}
	if *traceFile != "" {
		stop, err := startTrace(*traceFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer stop()
	}
	if len(d.Scenarios) > 0 {
		if _, err := runBench(d, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	if alone["fair"] {
		if err := runFairBench(os.Stdout, os.Stderr, d.ContendedDuration, d.Spin, d.Goroutines); err != nil {
			fmt.Fprintln(os.Stderr, "bench: fair:", err)
			return 1
		}
	}
	if alone["rw"] {
		if err := runRWBench(os.Stdout, os.Stderr, d.ContendedDuration, d.Spin, d.Goroutines, 4); err != nil {
			fmt.Fprintln(os.Stderr, "bench: rw:", err)
			return 1
		}
	}
	if alone["groups"] {
		if err := runGroupsBench(os.Stdout, os.Stderr, d.Duration); err != nil {
			fmt.Fprintln(os.Stderr, "bench: groups:", err)
			return 1
		}
	}
	if alone["herd"] {
		if err := runHerdBench(os.Stdout, os.Stderr, 10_000); err != nil {
			fmt.Fprintln(os.Stderr, "bench: herd:", err)
			return 1
		}
	}
	if alone["dq"] {
		if _, err := runDelayQueueBench(os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "bench: dq:", err)
			return 1
		}
	}
	return 0
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func writeMemProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
}

func startTrace(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		trace.Stop()
		f.Close()
	}, nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
