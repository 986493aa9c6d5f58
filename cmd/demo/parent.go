package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// workerGrace is how long workers get to stop once told to, before they are
// killed.
const workerGrace = 10 * time.Second

// runParent runs the demo: Redis, workers, its own owners, progress, verdict.
func runParent(ctx context.Context, cfg config, std stdio) int {
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	// After the first Ctrl-C, which stops the run cleanly, a second one
	// kills at once.
	defer context.AfterFunc(ctx, stopSignals)()

	addr, stopRedis, err := redisFor(cfg)
	if err != nil {
		fmt.Fprintln(std.err, "demo:", err)
		if errors.Is(err, redisserver.ErrNoBinary) {
			fmt.Fprintln(std.err, "      or run the demo against a Redis you have: --redis HOST:PORT")
		}
		return exitSetup
	}
	defer stopRedis()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := resetCounters(ctx, rdb, cfg.counters); err != nil {
		fmt.Fprintf(std.err, "demo: redis %s: %v\n", addr, err)
		return exitSetup
	}
	banner(std.out, cfg, addr)

	t := newTally(cfg.counters)
	ranFor := contend(ctx, cfg, addr, rdb, t, std)

	// The verdict is wanted after a Ctrl-C too.
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	v, err := judge(vctx, rdb, t, ranFor)
	if err != nil {
		fmt.Fprintln(std.err, "demo:", err)
		return exitFail
	}
	v.print(std.out)
	if !v.ok() {
		return exitFail
	}
	return exitPass
}

// redisFor returns the address of the Redis to use, --redis or one of our
// own, and how to stop ours. Ours runs in a process group of its own, so a
// Ctrl-C stops the demo, not the Redis its verdict still has to read; it
// fails with redisserver.ErrNoBinary (install instructions) when there is
// no redis-server.
func redisFor(cfg config) (addr string, stop func(), err error) {
	if cfg.redisAddr != "" {
		return cfg.redisAddr, func() {}, nil
	}
	srv, err := redisserver.Start()
	if err != nil {
		return "", nil, err
	}
	return srv.Addr, func() { _ = srv.Stop(); _ = srv.Close() }, nil
}

// resetCounters starts the counters (and --unsafe's tickets) from zero, so
// that each must end equal to its number of critical sections.
func resetCounters(ctx context.Context, rdb redis.UniversalClient, counters int) error {
	keys := make([]string, 0, 2*counters)
	for c := range counters {
		keys = append(keys, counterKey(c), ticketKey(c))
	}
	return rdb.Del(ctx, keys...).Err()
}

// contend runs the workers and this process's owners for cfg.duration or
// until ctx ends, with the progress line, and returns how long they ran.
// Whatever breaks is noted in t.
func contend(ctx context.Context, cfg config, addr string, rdb *redis.Client, t *tally, std stdio) time.Duration {
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	workers := startWorkers(cfg, addr, t, std.err)
	// The progress line outlives a Ctrl-C, to show the workers' last reports.
	progressCtx, stopProgress := context.WithCancel(context.WithoutCancel(ctx))
	progressDone := showProgress(progressCtx, std, cfg, t, start)

	runLocal(runCtx, cfg, rdb, t)
	ranFor := time.Since(start)
	stopWorkers(ctx, workers, t)
	stopProgress()
	<-progressDone
	return ranFor
}

// runLocal runs this process's owners, as process 0, until ctx ends.
func runLocal(ctx context.Context, cfg config, rdb *redis.Client, t *tally) {
	rt, err := actorlock.New(rdb)
	if err != nil {
		t.fail(err)
		return
	}
	if err := runOwners(ctx, cfg, 0, rt, rdb, t); err != nil {
		t.fail(err)
	}
	if err := closeRuntime(ctx, rt); err != nil {
		t.fail(fmt.Errorf("process 0: close: %w", err))
	}
}

// worker is a worker process seen from the parent.
type worker struct {
	proc    int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	drained chan struct{} // closed once its stdout is read to the end
}

// startWorkers starts processes 1 to cfg.procs-1; those that fail to start
// are noted in t.
func startWorkers(cfg config, addr string, t *tally, stderr io.Writer) []*worker {
	var ws []*worker
	for proc := 1; proc < cfg.procs; proc++ {
		w, err := startWorker(cfg, proc, addr, t, stderr)
		if err != nil {
			t.fail(fmt.Errorf("process %d: %w", proc, err))
			continue
		}
		ws = append(ws, w)
	}
	return ws
}

func startWorker(cfg config, proc int, addr string, t *tally, stderr io.Writer) (*worker, error) {
	cmd, err := workerCmd(cfg, proc, addr)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &worker{proc: proc, cmd: cmd, stdin: stdin, drained: make(chan struct{})}
	go w.collect(stdout, t)
	return w, nil
}

// collect merges the worker's reports into t until its stdout ends.
func (w *worker) collect(stdout io.Reader, t *tally) {
	defer close(w.drained)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		var r report
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.fail(fmt.Errorf("process %d: bad report: %w", w.proc, err))
			continue
		}
		t.merge(r)
	}
	if err := sc.Err(); err != nil {
		t.fail(fmt.Errorf("process %d: reading reports: %w", w.proc, err))
	}
	_, _ = io.Copy(io.Discard, stdout) // let it exit even if we stopped reading
}

// stopWorkers tells every worker to stop, waits for their last reports and
// kills those that take longer than workerGrace.
func stopWorkers(ctx context.Context, ws []*worker, t *tally) {
	for _, w := range ws {
		_ = w.stdin.Close()
	}
	// One deadline for all: they stop in parallel.
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), workerGrace)
	defer cancel()
	for _, w := range ws {
		select {
		case <-w.drained:
		case <-grace.Done():
			t.fail(fmt.Errorf("process %d did not stop within %v; killed", w.proc, workerGrace))
			_ = w.cmd.Process.Kill()
			<-w.drained
		}
		if err := w.cmd.Wait(); err != nil {
			t.fail(fmt.Errorf("process %d: %w", w.proc, err))
		}
	}
}
