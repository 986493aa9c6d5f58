package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// options select and size the scenarios.
type options struct {
	Scenarios  []string // of allScenarios
	Contenders []string // registry names, printed in this order
	// Duration is each uncontended run's; ContendedDuration each contended
	// one's (scenarios b and c).
	Duration, ContendedDuration time.Duration
	Spin                        time.Duration // critical section of b and c
	Goroutines                  int           // a32 and b
	Procs, PerProc              int           // c
	StartDelay                  time.Duration // c: children's common start
}

var allScenarios = []string{"a1", "a32", "b", "c"}

func defaultOptions() options {
	return options{
		Scenarios:         allScenarios,
		Contenders:        defaultContenders,
		Duration:          5 * time.Second,
		ContendedDuration: 10 * time.Second,
		Spin:              100 * time.Microsecond,
		Goroutines:        32,
		Procs:             4,
		PerProc:           8,
		StartDelay:        startDelay,
	}
}

func (o options) validate() error {
	var errs []error
	for _, s := range o.Scenarios {
		if !contains(allScenarios, s) {
			errs = append(errs, fmt.Errorf("unknown scenario %q (have %s)", s, strings.Join(allScenarios, ",")))
		}
	}
	for _, c := range o.Contenders {
		if _, ok := registry[c]; !ok {
			errs = append(errs, fmt.Errorf("unknown contender %q (have %s)", c, strings.Join(knownContenders(), ",")))
		}
	}
	if o.Duration <= 0 || o.ContendedDuration <= 0 {
		errs = append(errs, errors.New("durations must be positive"))
	}
	if o.Goroutines < 1 || o.Procs < 1 || o.PerProc < 1 {
		errs = append(errs, errors.New("goroutine and process counts must be at least 1"))
	}
	return errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// results holds every scenario's rows, by scenario id.
type results struct {
	Uncontended map[string][]uncontendedStats
	Contended   map[string][]contendedStats
}

// harness runs the scenarios on one redis-server.
type harness struct {
	opts     options
	addr     string
	admin    *redis.Client // FLUSHALL, CONFIG RESETSTAT, INFO: never a contender's
	out      io.Writer     // tables
	progress io.Writer     // one line per run
}

// runBench starts a fresh redis-server, runs the selected scenarios on it,
// printing a table after each, and returns what it measured.
func runBench(opts options, out, progress io.Writer) (*results, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	srv, err := redisserver.Start()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	h := &harness{opts: opts, addr: srv.Addr, admin: admin, out: out, progress: progress}
	h.printHeader()

	res := &results{Uncontended: map[string][]uncontendedStats{}, Contended: map[string][]contendedStats{}}
	for _, sc := range opts.Scenarios {
		switch sc {
		case "a1", "a32":
			n := 1
			if sc == "a32" {
				n = opts.Goroutines
			}
			rows, err := h.uncontended(sc, n)
			if err != nil {
				return res, fmt.Errorf("scenario %s: %w", sc, err)
			}
			res.Uncontended[sc] = rows
			printUncontended(out, sc, n, opts, rows)
		case "b", "c":
			rows, err := h.contended(sc)
			if err != nil {
				return res, fmt.Errorf("scenario %s: %w", sc, err)
			}
			res.Contended[sc] = rows
			printContended(out, sc, opts, rows)
		}
	}
	return res, nil
}

func (h *harness) printHeader() {
	ctx := context.Background()
	version := "?"
	if info, err := h.admin.Info(ctx, "server").Result(); err == nil {
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				version = v
			}
		}
	}
	o := h.opts
	fmt.Fprintf(h.out, "actorlock benchmark: redis-server %s on %s (fresh, no persistence), %s %s/%s, GOMAXPROCS=%d, %d CPUs\n",
		version, h.addr, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Fprintf(h.out, "uncontended runs %v each; contended runs %v each, critical section %v busy-spin; contenders run one after another\n",
		o.Duration, o.ContendedDuration, o.Spin)
}

// window runs one contender's run between two INFO commandstats snapshots
// on a flushed server with reset stats, and returns what Redis counted.
func (h *harness) window(run func() (runResult, error)) (runResult, cmdStats, error) {
	ctx := context.Background()
	if err := h.admin.FlushAll(ctx).Err(); err != nil {
		return runResult{}, nil, fmt.Errorf("FLUSHALL: %w", err)
	}
	if err := h.admin.ConfigResetStat(ctx).Err(); err != nil {
		return runResult{}, nil, fmt.Errorf("CONFIG RESETSTAT: %w", err)
	}
	before, err := readCmdStats(ctx, h.admin)
	if err != nil {
		return runResult{}, nil, err
	}
	cpu0, err := h.cpu(ctx)
	if err != nil {
		return runResult{}, nil, err
	}
	res, err := run()
	if err != nil {
		return res, nil, err
	}
	cpu1, err := h.cpu(ctx)
	if err != nil {
		return res, nil, err
	}
	res.ClientCPU, res.RedisCPU = cpu1.client-cpu0.client, cpu1.redis-cpu0.redis
	after, err := readCmdStats(ctx, h.admin)
	if err != nil {
		return res, nil, err
	}
	return res, after.sub(before), nil
}

func (h *harness) uncontended(id string, goroutines int) ([]uncontendedStats, error) {
	names := make([]string, goroutines)
	for g := range names {
		names[g] = fmt.Sprintf("bench:%s:%d", id, g)
	}
	var rows []uncontendedStats
	for _, c := range h.opts.Contenders {
		fmt.Fprintf(h.progress, "running %s: %s (%v)\n", id, c, h.opts.Duration)
		res, delta, err := h.window(func() (runResult, error) {
			return runLocal(h.addr, c, h.schedule(workload{Goroutines: goroutines, LockNames: names}, 50*time.Millisecond, h.opts.Duration))
		})
		if err != nil {
			return nil, err
		}
		rows = append(rows, analyzeUncontended(c, res, h.opts.Duration, delta))
	}
	return rows, nil
}

func (h *harness) contended(id string) ([]contendedStats, error) {
	o := h.opts
	w := workload{LockNames: []string{"bench:" + id}, Spin: o.Spin}
	var rows []contendedStats
	for _, c := range o.Contenders {
		if c == evalshaName {
			continue // not a lock
		}
		fmt.Fprintf(h.progress, "running %s: %s (%v)\n", id, c, o.ContendedDuration)
		procs, goroutines := 1, o.Goroutines
		if id == "c" {
			procs, goroutines = o.Procs, o.Procs*o.PerProc
		}
		res, delta, err := h.window(func() (runResult, error) {
			if id == "b" {
				w.Goroutines = o.Goroutines
				return runLocal(h.addr, c, h.schedule(w, 50*time.Millisecond, o.ContendedDuration))
			}
			w.Goroutines = o.PerProc
			return runProcesses(h.addr, c, o.Procs, h.schedule(w, o.StartDelay, o.ContendedDuration))
		})
		if err != nil {
			return nil, err
		}
		rows = append(rows, analyzeContended(c, res, o.ContendedDuration, goroutines, procs, delta))
	}
	return rows, nil
}

// schedule sets w to start after delay (time for its goroutines, or child
// processes, to get ready) and to last d.
func (h *harness) schedule(w workload, delay, d time.Duration) workload {
	w.Start = time.Now().Add(delay)
	w.End = w.Start.Add(d)
	return w
}

// cpuTimes is the CPU time used so far by the client side (this process
// and its children that have ended: the processes of a run of c) and by
// redis-server (INFO cpu, its main thread and the rest).
type cpuTimes struct{ client, redis time.Duration }

func (h *harness) cpu(ctx context.Context) (cpuTimes, error) {
	var t cpuTimes
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			return t, fmt.Errorf("getrusage: %w", err)
		}
		t.client += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	info, err := h.admin.Info(ctx, "cpu").Result()
	if err != nil {
		return t, fmt.Errorf("INFO cpu: %w", err)
	}
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return t, fmt.Errorf("INFO cpu: %q: %w", line, err)
			}
			t.redis += time.Duration(f * float64(time.Second))
		}
	}
	return t, nil
}
