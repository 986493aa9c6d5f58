package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
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

	"github.com/actorlock/actorlock/internal/redisserver"
)

// Bounds of the orchestrator's waits.
const (
	readyTimeout  = 30 * time.Second // nodes up and listening
	stopTimeout   = 15 * time.Second // workloads stopped after "stop"
	exitTimeout   = 20 * time.Second // nodes exited after "quit" (a runtime's Close may wait ~4 s for a dead peer)
	deliverySlack = 3 * time.Second  // on top of the longest delay, for the last delayed jobs
	takeoverSlack = 2 * time.Second  // on top of the lease, for the leader's takeover
)

// runParent runs the demo: Redis, nodes, progress, verdict.
func runParent(ctx context.Context, cfg config, std stdio) int {
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	// After the first Ctrl-C, which stops the run cleanly, a second one
	// kills at once (and with the demo its nodes and Redis: they get
	// SIGKILL when their parent dies).
	defer context.AfterFunc(ctx, stopSignals)()

	be, err := redisFor(ctx, cfg)
	if err != nil {
		fmt.Fprintln(std.err, "demo:", err)
		if errors.Is(err, redisserver.ErrNoBinary) || errors.Is(err, redisserver.ErrNoCLI) {
			fmt.Fprintln(std.err, "      or run the demo against a Redis you have: --redis HOST:PORT")
		}
		return exitSetup
	}
	defer be.stop()
	rdb := newClient(be.addrs, be.cluster)
	defer rdb.Close()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = seed(sctx, rdb, cfg)
	cancel()
	if err != nil {
		fmt.Fprintf(std.err, "demo: %s: %v\n", be, err)
		return exitSetup
	}
	cfg.seed = runID()
	fmt.Fprintf(std.out, "actorlock demo: %d nodes for %v, lease %v, kill %v, %s\n", cfg.nodes, cfg.duration, cfg.lease, cfg.kill, be)
	if cfg.unsafe {
		fmt.Fprintln(std.out, "--unsafe: nodes skip the locks, to show what they prevent; expect the verdict to fail")
	}
	r := &runner{cfg: cfg, std: std, be: be, rdb: rdb, agg: newAgg(cfg.nodes)}
	return r.run(ctx)
}

func runID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type runner struct {
	cfg   config
	std   stdio
	be    backend
	rdb   redis.UniversalClient
	agg   *agg
	procs []*nodeProc

	workStart, workEnd time.Time
	stopAt             time.Time // when the nodes were told to stop
	interrupted        bool
}

// nodeProc is a node process seen from the orchestrator.
type nodeProc struct {
	i   int
	cmd *exec.Cmd

	mu       sync.Mutex
	stdin    io.WriteCloser
	closed   bool // stdin closed
	killed   bool // by us, on purpose
	quitting bool // told to quit

	exited  chan struct{} // closed once it exited and its output was read
	waitErr error
}

func (p *nodeProc) tell(c command) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	b, _ := json.Marshal(c)
	_, _ = p.stdin.Write(append(b, '\n')) // a dead node's pipe fails; its exit says more
}

func (p *nodeProc) quit() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quitting = true
	if !p.closed {
		p.closed = true
		_ = p.stdin.Close()
	}
}

func (p *nodeProc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

func (p *nodeProc) isKilled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

func (r *runner) run(ctx context.Context) int {
	defer r.reap()
	if err := r.startNodes(); err != nil {
		fmt.Fprintln(r.std.err, "demo: start nodes:", err)
		return exitSetup
	}
	if !r.waitReady(ctx) {
		if ctx.Err() != nil {
			fmt.Fprintln(r.std.out, "interrupted before the nodes were ready")
			return exitFail
		}
		fmt.Fprintf(r.std.err, "demo: the nodes were not ready within %v\n", readyTimeout)
		r.printErrors()
		return exitSetup
	}
	peers := make([]string, r.cfg.nodes)
	r.agg.mu.Lock()
	for i, n := range r.agg.nodes {
		peers[i] = n.addr
		role := ""
		if i == r.agg.victim {
			role = "  (holds " + leaderLock + "; "
			if r.cfg.kill {
				role += "SIGKILLed at half time)"
			} else {
				role += "releases it at half time)"
			}
		}
		fmt.Fprintf(r.std.out, "node %d: pid %d, remote %s%s\n", i, n.pid, n.addr, role)
	}
	r.agg.mu.Unlock()

	r.workStart = time.Now()
	for _, p := range r.procs {
		p.tell(command{Cmd: "peers", Peers: peers})
	}
	prog := r.startProgress()
	r.work(ctx)
	r.stopWork()
	r.workEnd = time.Now()
	r.awaitDeliveries()
	r.quitNodes()
	prog.stop()
	return r.verdict()
}

// startNodes starts the node processes: this program, re-executed.
func (r *runner) startNodes() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	for i := range r.cfg.nodes {
		args := []string{
			"--node", strconv.Itoa(i), "--nodes", strconv.Itoa(r.cfg.nodes),
			"--redis", joinAddrs(r.be.addrs), "--node-cluster=" + strconv.FormatBool(r.be.cluster),
			"--lease", r.cfg.lease.String(), "--kill=" + strconv.FormatBool(r.cfg.kill),
			"--accounts", strconv.Itoa(r.cfg.accounts), "--jobs", strconv.Itoa(r.cfg.jobs),
			"--unsafe=" + strconv.FormatBool(r.cfg.unsafe), "--node-run", r.cfg.seed,
		}
		cmd := exec.Command(exe, args...)
		cmd.SysProcAttr = nodeProcAttr()
		cmd.Stderr = r.std.err
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		p := &nodeProc{i: i, cmd: cmd, stdin: stdin, exited: make(chan struct{})}
		r.procs = append(r.procs, p)
		go r.collect(p, stdout)
	}
	return nil
}

func joinAddrs(addrs []string) string {
	s := ""
	for i, a := range addrs {
		if i > 0 {
			s += ","
		}
		s += a
	}
	return s
}

// collect applies node p's events until its stdout ends, then reaps it.
func (r *runner) collect(p *nodeProc, stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			r.agg.fail("node %d: bad event %q: %v", p.i, sc.Text(), err)
			continue
		}
		r.agg.apply(p.i, ev)
	}
	if err := sc.Err(); err != nil {
		r.agg.fail("node %d: reading events: %v", p.i, err)
	}
	_, _ = io.Copy(io.Discard, stdout)
	p.waitErr = p.cmd.Wait()
	close(p.exited)
	p.mu.Lock()
	expected := p.killed || p.quitting
	p.mu.Unlock()
	if !expected {
		r.agg.fail("node %d exited on its own: %v", p.i, p.waitErr)
		r.markDead(p.i) // the others must not wait for it
	} else if p.waitErr != nil && !p.isKilled() {
		r.agg.fail("node %d: %v", p.i, p.waitErr)
	}
	r.agg.mu.Lock()
	r.agg.poke()
	r.agg.mu.Unlock()
}

// waitFor waits until cond (called with agg.mu held) holds, or timeout, or
// ctx ends; it reports whether cond held.
func (r *runner) waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		r.agg.mu.Lock()
		ok, changed := cond(), r.agg.changed
		r.agg.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (r *runner) waitReady(ctx context.Context) bool {
	return r.waitFor(ctx, readyTimeout, func() bool {
		for i, n := range r.agg.nodes {
			if !n.ready || r.procs[i].hasExited() {
				return false
			}
		}
		return true
	}) && !r.anyExited()
}

func (r *runner) anyExited() bool {
	for _, p := range r.procs {
		if p.hasExited() {
			return true
		}
	}
	return false
}

// work runs the workload for the duration (or until Ctrl-C), killing the
// victim at half time, and waits for the leader's takeover.
func (r *runner) work(ctx context.Context) {
	half := time.NewTimer(r.cfg.duration / 2)
	defer half.Stop()
	end := time.NewTimer(r.cfg.duration)
	defer end.Stop()
	var event int64 // kill or abdication
loop:
	for {
		select {
		case <-half.C:
			event = r.halfTime()
		case <-end.C:
			break loop
		case <-ctx.Done():
			r.interrupted = true
			return
		}
	}
	if event == 0 || r.cfg.unsafe {
		return
	}
	// The run is over, but the takeover may still be under way: it needs
	// up to a lease after the kill.
	deadline := time.Until(time.Unix(0, event).Add(r.cfg.lease + takeoverSlack))
	if !r.waitFor(ctx, max(deadline, 0), func() bool { return r.agg.takeoverAt != 0 }) && ctx.Err() != nil {
		r.interrupted = true
	}
}

// halfTime kills the victim (or has it abdicate); it returns when.
func (r *runner) halfTime() int64 {
	v := r.procs[r.agg.victim]
	if !r.cfg.kill {
		now := time.Now().UnixNano()
		r.agg.mu.Lock()
		r.agg.abdicatedAt = now
		r.agg.mu.Unlock()
		v.tell(command{Cmd: "abdicate"})
		return now
	}
	v.mu.Lock()
	v.killed = true
	v.mu.Unlock()
	err := v.cmd.Process.Signal(syscall.SIGKILL)
	now := time.Now().UnixNano()
	if err != nil {
		r.agg.fail("kill node %d: %v", v.i, err)
		return 0
	}
	r.agg.mu.Lock()
	r.agg.killAt = now
	r.agg.poke()
	r.agg.mu.Unlock()
	r.markDead(v.i)
	return now
}

// markDead tells every other node that node i is gone.
func (r *runner) markDead(i int) {
	for _, p := range r.procs {
		if p.i != i {
			p.tell(command{Cmd: "dead", Node: i})
		}
	}
}

// live are the nodes neither killed nor exited.
func (r *runner) live() []*nodeProc {
	var out []*nodeProc
	for _, p := range r.procs {
		if !p.isKilled() && !p.hasExited() {
			out = append(out, p)
		}
	}
	return out
}

// stopWork stops the workloads and waits until they have.
func (r *runner) stopWork() {
	r.stopAt = time.Now()
	live := r.live()
	for _, p := range live {
		p.tell(command{Cmd: "stop"})
	}
	ok := r.waitFor(context.Background(), stopTimeout, func() bool {
		for _, p := range live {
			if !r.agg.nodes[p.i].stopped && !p.hasExited() {
				return false
			}
		}
		return true
	})
	if !ok {
		r.agg.fail("the workload did not stop within %v", stopTimeout)
	}
}

// awaitDeliveries waits until every offered delayed job is delivered, or
// until the longest delay and some slack have passed.
func (r *runner) awaitDeliveries() {
	r.waitFor(context.Background(), maxDelay+deliverySlack, func() bool { return r.agg.pendingDeliveries() == 0 })
}

// quitNodes tells the nodes to exit and waits; those that do not are killed.
func (r *runner) quitNodes() {
	for _, p := range r.procs {
		p.quit()
	}
	deadline := time.NewTimer(exitTimeout)
	defer deadline.Stop()
	for _, p := range r.procs {
		select {
		case <-p.exited:
		case <-deadline.C:
			r.agg.fail("node %d did not exit within %v; killed", p.i, exitTimeout)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

// reap kills and waits for every node still running: nothing is left
// behind, whatever happened.
func (r *runner) reap() {
	for _, p := range r.procs {
		p.quit()
		if !p.hasExited() {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

func (r *runner) printErrors() {
	r.agg.mu.Lock()
	defer r.agg.mu.Unlock()
	for _, e := range r.agg.errs {
		fmt.Fprintln(r.std.err, "  error:", e)
	}
}
