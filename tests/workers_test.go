package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
)

// Child processes are this test binary re-run with workerEnv naming what to
// do; their parameters come in env vars, their results as lines on stdout.
const workerEnv = "ACTORLOCK_TEST_WORKER"

type worker struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

// spawn starts a worker process; it is killed when the test ends.
func spawn(t *testing.T, mode string, env map[string]string) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+mode)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w := &worker{cmd: cmd, lines: make(chan string, 1<<16), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer close(w.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.done
		_ = cmd.Wait()
		// A worker talking to a runtime over protoactor remote leaves an
		// inbound stream that ends when the runtime sees the connection
		// drop. Let it end before the runtime's Close (a later cleanup):
		// protoactor's graceful shutdown races with a stream ending under
		// it (it sends on the channel the stream's reader closes), which
		// the race detector reports. Close itself waits for a stream that
		// ended to settle (remoting's streamEnds).
		time.Sleep(200 * time.Millisecond)
	})
	return w
}

// expect waits for a line starting with prefix and returns the rest.
func (w *worker) expect(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	line := w.expectLine(t, within, fmt.Sprintf("%q", prefix), func(l string) bool { return strings.HasPrefix(l, prefix) })
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}

// expectLine waits for a line that match accepts (what names it), skipping
// the others, and returns it.
func (w *worker) expectLine(t *testing.T, within time.Duration, what string, match func(string) bool) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case line, ok := <-w.lines:
			require.True(t, ok, "worker exited before printing %s", what)
			if match(line) {
				return line
			}
		case <-deadline:
			t.Fatalf("worker printed no %s within %v", what, within)
		}
	}
}

// wait waits for the worker to exit successfully and returns its lines.
func (w *worker) wait(t *testing.T, within time.Duration) []string {
	t.Helper()
	var lines []string
	deadline := time.After(within)
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				require.NoError(t, w.cmd.Wait())
				return lines
			}
			lines = append(lines, line)
		case <-deadline:
			t.Fatalf("worker did not finish within %v", within)
		}
	}
}

func runWorker(mode string) int {
	rdb := workerClient(os.Getenv)
	defer rdb.Close()
	opts := []actorlock.Option{}
	if ms := envInt("WATCHDOG_MS"); ms > 0 {
		opts = append(opts, actorlock.WithWatchdog(time.Duration(ms)*time.Millisecond))
	}
	if ms := envInt("FAIR_WAIT_MS"); ms > 0 {
		opts = append(opts, actorlock.WithFairWaitTimeout(time.Duration(ms)*time.Millisecond))
	}
	rt, err := actorlock.New(rdb, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer rt.Close(context.Background())
	switch mode {
	case "hold":
		return workerHold(rt)
	case "mutex":
		return workerMutex(rt, rdb)
	case "pingpong":
		return workerPingPong(rt)
	}
	if run := workerModes[mode]; run != nil {
		return run(rt, rdb)
	}
	fmt.Fprintln(os.Stderr, "worker: unknown mode", mode)
	return 2
}

// workerModes holds worker modes that other test files add (in an init
// func) without touching the dispatcher above.
var workerModes = map[string]func(rt *actorlock.Runtime, rdb redis.UniversalClient) int{}

func envInt(k string) int {
	n, _ := strconv.Atoi(os.Getenv(k))
	return n
}

// workerHold acquires LOCK_NAME, says so, and holds it until killed.
func workerHold(rt *actorlock.Runtime) int {
	h, err := rt.Lock(os.Getenv("LOCK_NAME")).Acquire(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker hold:", err)
		return 1
	}
	fmt.Printf("ACQUIRED %d\n", h.Token())
	select {}
}

// workerMutex runs OWNERS goroutines, each its own owner, doing ITERS times:
// lock, non-atomic read-modify-write of COUNTER_KEY, unlock. It prints one
// JSON section per critical section.
func workerMutex(rt *actorlock.Runtime, rdb redis.UniversalClient) int {
	name, key := os.Getenv("LOCK_NAME"), os.Getenv("COUNTER_KEY")
	owners, iters, proc := envInt("OWNERS"), envInt("ITERS"), os.Getpid()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rec recorder
	var wg sync.WaitGroup
	errs := make(chan error, owners)
	fmt.Println("READY")
	for range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := rt.Lock(name)
			for range iters {
				if err := criticalIncrement(ctx, l, rdb, key, proc, &rec); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, "worker mutex:", err)
		return 1
	}
	for _, s := range rec.sections {
		b, _ := json.Marshal(s)
		fmt.Printf("SECTION %s\n", b)
	}
	return 0
}

// criticalIncrement is the unit of the mutual exclusion tests: a GET and a
// SET of counter+1 that lose updates unless the lock excludes.
func criticalIncrement(ctx context.Context, l *actorlock.Lock, rdb redis.UniversalClient, key string, proc int, rec *recorder) error {
	h, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	start := time.Now().UnixNano()
	n, err := rdb.Get(ctx, key).Int()
	if err != nil && err != redis.Nil {
		return err
	}
	time.Sleep(100 * time.Microsecond) // widen the window a broken lock would expose
	if err := rdb.Set(ctx, key, n+1, 0).Err(); err != nil {
		return err
	}
	end := time.Now().UnixNano()
	rec.add(section{Proc: proc, Owner: h.Owner(), Token: h.Token(), Start: start, End: end})
	return h.Unlock(ctx)
}

// workerPingPong takes turns on LOCK_NAME with another process ROUNDS times:
// acquire, print "A <unix ns>", hold HOLD_MS, print "R <unix ns>", unlock,
// pause GAP_MS so the other side gets its turn.
func workerPingPong(rt *actorlock.Runtime) int {
	l := rt.Lock(os.Getenv("LOCK_NAME"))
	rounds := envInt("ROUNDS")
	hold := time.Duration(envInt("HOLD_MS")) * time.Millisecond
	gap := time.Duration(envInt("GAP_MS")) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fmt.Println("READY")
	for range rounds {
		h, err := l.Acquire(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker pingpong:", err)
			return 1
		}
		fmt.Printf("A %d\n", time.Now().UnixNano())
		time.Sleep(hold)
		fmt.Printf("R %d\n", time.Now().UnixNano())
		if err := h.Unlock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "worker pingpong:", err)
			return 1
		}
		time.Sleep(gap)
	}
	return 0
}
