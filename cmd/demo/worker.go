package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

// reportEvery is how often a worker sends what its owners did: often enough
// for live totals, rarely enough to batch many sections in one line.
const reportEvery = 100 * time.Millisecond

// closeTimeout bounds closing a runtime (releasing what it holds).
const closeTimeout = 10 * time.Second

// runWorker is a worker process: its owners run until the parent closes our
// stdin (or dies, which closes it too), reporting to the parent on stdout.
func runWorker(ctx context.Context, cfg config, std stdio) int {
	// A Ctrl-C in a terminal reaches the workers too: stop as the parent
	// does, reporting every section that ran, rather than die mid-way.
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parentDone := make(chan struct{})
	go func() {
		defer close(parentDone)
		_, _ = io.Copy(io.Discard, std.in)
		cancel()
	}()

	rdb := redis.NewClient(&redis.Options{Addr: cfg.redisAddr})
	defer rdb.Close()
	code := workerRun(ctx, cfg, rdb, std)
	<-parentDone // leave no goroutine behind; the parent closes stdin promptly
	return code
}

func workerRun(ctx context.Context, cfg config, rdb *redis.Client, std stdio) int {
	rt, err := actorlock.New(rdb)
	if err != nil {
		fmt.Fprintf(std.err, "demo: process %d: %v\n", cfg.worker, err)
		return exitFail
	}
	rep := &reporter{enc: json.NewEncoder(std.out)}
	reported := rep.run(ctx)
	ownersErr := runOwners(ctx, cfg, cfg.worker, rt, rdb, rep)
	closeErr := closeRuntime(ctx, rt)
	<-reported
	flushErr := rep.flush()
	code := exitPass
	for _, err := range []error{ownersErr, closeErr, flushErr} {
		if err != nil {
			fmt.Fprintf(std.err, "demo: process %d: %v\n", cfg.worker, err)
			code = exitFail
		}
	}
	return code
}

// closeRuntime closes rt even when ctx has ended: its holds must be released.
func closeRuntime(ctx context.Context, rt *actorlock.Runtime) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	return rt.Close(ctx)
}

// reporter is a worker's sink: it batches what owners do into JSON lines.
type reporter struct {
	mu    sync.Mutex
	enc   *json.Encoder
	batch report
}

func (r *reporter) record(s section) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batch.Sections = append(r.batch.Sections, s)
}

func (r *reporter) timedOut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batch.Timeouts++
}

// flush writes the batch as one line (the encoder writes it in one call,
// so a line is never torn).
func (r *reporter) flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.batch.Sections) == 0 && r.batch.Timeouts == 0 {
		return nil
	}
	err := r.enc.Encode(r.batch)
	r.batch = report{}
	return err
}

// run flushes every reportEvery until ctx ends; the final flush is the
// caller's, once the owners have stopped.
func (r *reporter) run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(reportEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				_ = r.flush() // a broken pipe means the parent is gone; stdin tells us too
			case <-ctx.Done():
				return
			}
		}
	}()
	return done
}

// workerCmd is worker process proc: this program re-executed.
func workerCmd(cfg config, proc int, addr string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--worker", strconv.Itoa(proc), "--redis", addr,
		"--owners", strconv.Itoa(cfg.owners), "--counters", strconv.Itoa(cfg.counters),
		"--hold", cfg.hold.String(), "--wait", cfg.wait.String(),
		"--unsafe=" + strconv.FormatBool(cfg.unsafe),
	}
	return exec.Command(exe, args...), nil
}
