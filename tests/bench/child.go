package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// childEnv carries a child process's job: the program re-executes itself
// with it set, and the child prints its runResult as JSON on stdout.
const childEnv = "ACTORLOCK_BENCH_CHILD"

type childJob struct {
	Addr      string   `json:"addr"`
	Contender string   `json:"contender"`
	Workload  workload `json:"workload"`
}

// childJobFromEnv returns the job when this process is a child.
func childJobFromEnv() (childJob, bool, error) {
	v, ok := os.LookupEnv(childEnv)
	if !ok {
		return childJob{}, false, nil
	}
	var job childJob
	if err := json.Unmarshal([]byte(v), &job); err != nil {
		return childJob{}, true, fmt.Errorf("%s: %w", childEnv, err)
	}
	return job, true, nil
}

// childMain runs a child's job and returns the exit code.
func childMain() int {
	job, _, err := childJobFromEnv()
	if err == nil {
		var res runResult
		res, err = runLocal(job.Addr, job.Contender, job.Workload)
		if err == nil {
			err = json.NewEncoder(os.Stdout).Encode(res)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 1
	}
	return 0
}

// runProcesses runs w in procs child processes of this executable, all
// starting at w.Start, and merges what they report.
func runProcesses(addr, name string, procs int, w workload) (runResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return runResult{}, err
	}
	parts := make([]runResult, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for p := range procs {
		wp := w
		wp.Process, wp.GoroutineBase = p, p*w.Goroutines
		job, err := json.Marshal(childJob{Addr: addr, Contender: name, Workload: wp})
		if err != nil {
			errs[p] = err
			continue
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), childEnv+"="+string(job))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			errs[p] = fmt.Errorf("start child %d: %w", p, err)
			continue
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				errs[p] = fmt.Errorf("child %d: %w: %s", p, err, bytes.TrimSpace(stderr.Bytes()))
				return
			}
			if err := json.Unmarshal(stdout.Bytes(), &parts[p]); err != nil {
				errs[p] = fmt.Errorf("child %d: bad report: %w", p, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return runResult{}, err
	}
	return merge(parts), nil
}

// startDelay is how far ahead the children's common start is set: enough
// for them to exec and set up on a busy two-core machine.
const startDelay = time.Second
