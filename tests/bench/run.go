package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// workload is what the goroutines of one process do in one run.
type workload struct {
	Goroutines int
	// Process numbers the processes of a multi-process run.
	Process int
	// GoroutineBase numbers this process's goroutines globally (process i
	// of a multi-process run starts at i*Goroutines).
	GoroutineBase int
	// LockNames is the lock each goroutine uses, by local index, cycling
	// when shorter than Goroutines.
	LockNames []string
	// Spin is the critical section: busy, not asleep, so the holder
	// competes for the CPU as real work would.
	Spin time.Duration
	// Start and End bound the run (wall clock, so that processes agree).
	Start, End time.Time
}

func (w workload) lockName(g int) string { return w.LockNames[g%len(w.LockNames)] }

// record is one acquisition, in wall-clock nanoseconds: Call when lock was
// called, Acq when it returned, Rel just before unlock was called, Done when
// unlock returned. [Acq, Rel] lies inside the real hold in Redis, so two
// records whose [Acq, Rel] overlap prove that the lock failed.
type record struct {
	P    int   `json:"p"` // process
	G    int   `json:"g"` // goroutine, unique across processes
	Call int64 `json:"c"`
	Acq  int64 `json:"a"`
	Rel  int64 `json:"r"`
	Done int64 `json:"d"`
}

// runResult is what one process measured in one run.
type runResult struct {
	Records []record `json:"records"` // acquired before End
	// Commands: client-issued commands counted by the hook, pub/sub
	// commands excluded (see pubsubCommands).
	Commands   int64  `json:"commands"`
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	GaveUp     int64  `json:"gave_up"`
	// Late is how long after Start this process was ready to begin.
	Late time.Duration `json:"late"`
	// ClientCPU and RedisCPU: CPU time the run cost the contender's
	// processes and redis-server (set by the harness, not by processes).
	ClientCPU time.Duration `json:"-"`
	RedisCPU  time.Duration `json:"-"`
}

// runLocal runs w against contender name on a client of its own (default
// options, counted by a hook), as one process of a run.
func runLocal(addr, name string, w workload) (runResult, error) {
	open, ok := registry[name]
	if !ok {
		return runResult{}, fmt.Errorf("unknown contender %q", name)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	counter := &cmdCounter{}
	rdb.AddHook(counter)
	im, err := open(rdb)
	if err != nil {
		return runResult{}, fmt.Errorf("%s: %w", name, err)
	}
	res := runWorkers(im, w)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := im.close(ctx); err != nil {
		return res, fmt.Errorf("%s: close: %w", name, err)
	}
	if g, ok := im.(gaveUpCounter); ok {
		res.GaveUp = g.gaveUp()
	}
	res.Commands = counter.n.Load()
	return res, nil
}

// runWorkers runs w's goroutines, each a lock/critical section/unlock loop
// from Start to End. Lock calls still waiting at End are cancelled; an
// acquisition made after End is released and not counted.
func runWorkers(im impl, w workload) runResult {
	var (
		wg       sync.WaitGroup
		perG     = make([][]record, w.Goroutines)
		errs     atomic.Int64
		firstErr error
		errMu    sync.Mutex
	)
	noteErr := func(err error) {
		if errs.Add(1) == 1 {
			errMu.Lock()
			firstErr = err
			errMu.Unlock()
		}
	}
	// Waiters are cancelled at End; unlocks get longer, so that every
	// acquisition is released.
	lockCtx, cancelLock := context.WithDeadline(context.Background(), w.End)
	defer cancelLock()
	unlockCtx, cancelUnlock := context.WithDeadline(context.Background(), w.End.Add(30*time.Second))
	defer cancelUnlock()

	lockers := make([]locker, w.Goroutines)
	for g := range lockers {
		lockers[g] = im.newLocker(w.lockName(g))
	}
	late := time.Since(w.Start)
	for g, l := range lockers {
		wg.Go(func() {
			time.Sleep(time.Until(w.Start))
			id := w.GoroutineBase + g
			for time.Now().Before(w.End) {
				call := time.Now()
				if err := l.lock(lockCtx); err != nil {
					// The run is over. Checking the clock too matters: ctx's
					// deadline timer may not have fired yet on a busy
					// machine while go-redis already used the deadline.
					if lockCtx.Err() != nil || !time.Now().Before(w.End) {
						return
					}
					noteErr(fmt.Errorf("lock: %w", err))
					time.Sleep(time.Millisecond) // no hot loop if Redis is gone
					continue
				}
				acq := time.Now()
				spin(w.Spin)
				rel := time.Now()
				if err := l.unlock(unlockCtx); err != nil {
					noteErr(fmt.Errorf("unlock: %w", err))
				}
				done := time.Now()
				if !acq.After(w.End) {
					perG[g] = append(perG[g], record{
						P: w.Process, G: id, Call: call.UnixNano(), Acq: acq.UnixNano(), Rel: rel.UnixNano(), Done: done.UnixNano(),
					})
				}
			}
		})
	}
	wg.Wait()

	res := runResult{Errors: errs.Load(), Late: max(late, 0)}
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}
	for _, rs := range perG {
		res.Records = append(res.Records, rs...)
	}
	return res
}

// spin busy-waits for d.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// merge combines the results of the processes of one run.
func merge(parts []runResult) runResult {
	var out runResult
	for _, p := range parts {
		out.Records = append(out.Records, p.Records...)
		out.Commands += p.Commands
		out.Errors += p.Errors
		out.GaveUp += p.GaveUp
		out.Late = max(out.Late, p.Late)
		if out.FirstError == "" {
			out.FirstError = p.FirstError
		}
	}
	return out
}
