package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// harness runs worker processes against one Redis (the one faults hit, with
// AOF appendfsync always) and a resource Redis (never faulted).
type harness struct {
	t       *testing.T
	rng     *rand.Rand
	seed    uint64
	srv     *redisserver.Server
	admin   *redis.Client
	res     *redisserver.Server
	dir     string
	lease   time.Duration
	wait    time.Duration
	names   []string
	clients int

	// With failover on: a replica of srv and a Sentinel watching both
	// (srv and replica swap when the fault fails over).
	replica, sentinel *redisserver.Server

	mu     sync.Mutex
	procs  []*proc // running
	all    []*proc
	next   int
	killed map[int]int64
	faults []fault
}

type proc struct {
	id     int
	cmd    *exec.Cmd
	proxy  *faultProxy
	log    string
	exited chan struct{}
}

type config struct {
	seed    uint64
	procs   int
	clients int
	names   int
	lease   time.Duration
	wait    time.Duration
	// failover: run a replica and a Sentinel for the sentinel-failover
	// fault.
	failover bool
}

// dataServerArgs: every server the faults hit persists each write (AOF
// always), so that a restart alone loses nothing.
var dataServerArgs = []string{"--appendonly", "yes", "--appendfsync", "always",
	"--enable-debug-command", "local", "--busy-reply-threshold", "1000"}

func newHarness(t *testing.T, c config) *harness {
	srv, err := redisserver.Start(dataServerArgs...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	res, err := redisserver.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Close() })
	h := &harness{t: t, rng: rand.New(rand.NewPCG(c.seed, 0x5eed)), seed: c.seed, srv: srv, res: res,
		dir: t.TempDir(), lease: c.lease, wait: c.wait, clients: c.clients, killed: map[int]int64{},
		admin: redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 10 * time.Second})}
	t.Cleanup(func() { _ = h.admin.Close() })
	for i := range c.names {
		h.names = append(h.names, fmt.Sprintf("chaos:%d", i))
	}
	if c.failover {
		h.startReplication()
	}
	for range c.procs {
		h.spawn()
	}
	t.Cleanup(h.stopAll)
	return h
}

func (h *harness) spawn() *proc {
	h.mu.Lock()
	id := h.next
	h.next++
	h.mu.Unlock()
	px, err := newFaultProxy(h.srv.Addr, h.seed<<8|uint64(id))
	require.NoError(h.t, err)
	p := &proc{id: id, proxy: px, log: filepath.Join(h.dir, fmt.Sprintf("w%d.jsonl", id)), exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), workerEnv+"=1",
		"CHAOS_REDIS="+px.Addr(), "CHAOS_RESOURCE="+h.res.Addr, "CHAOS_LOG="+p.log,
		"CHAOS_PROC="+strconv.Itoa(id), "CHAOS_CLIENTS="+strconv.Itoa(h.clients),
		"CHAOS_NAMES="+strings.Join(h.names, ","), "CHAOS_LEASE="+h.lease.String(),
		"CHAOS_WAIT="+h.wait.String(), "CHAOS_SEED="+strconv.FormatUint(h.seed, 10))
	p.cmd.Stderr = os.Stderr
	require.NoError(h.t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.all = append(h.all, p)
	h.mu.Unlock()
	return p
}

// pick picks a worker for a fault aimed at one process. Worker 0 is the
// soak's witness: it lives the whole run (faults of Redis and the network
// still reach it through the others' locks), so its heap and goroutines make
// a series that can be judged.
func (h *harness) pick() *proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.targets()[h.rng.IntN(len(h.targets()))]
}

func (h *harness) targets() []*proc {
	var out []*proc
	for _, p := range h.procs {
		if p.id != 0 {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return h.procs
	}
	return out
}

func (h *harness) remove(p *proc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, q := range h.procs {
		if q == p {
			h.procs = append(h.procs[:i], h.procs[i+1:]...)
			return
		}
	}
}

func (h *harness) record(f fault) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.mu.Unlock()
	h.t.Logf("fault %-24s %6.2fs  proc %d", f.Kind, time.Duration(f.End-f.Start).Seconds(), f.Proc)
}

// stopAll ends the run: every worker continues (if stopped) and is asked to
// finish (SIGTERM); one that does not within 20 s is killed.
func (h *harness) stopAll() {
	h.mu.Lock()
	procs := append([]*proc(nil), h.procs...)
	h.procs = nil
	h.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			h.mu.Lock()
			h.killed[p.id] = now()
			h.mu.Unlock()
			_ = p.cmd.Process.Kill()
			<-p.exited
			h.t.Errorf("worker %d did not finish within 20 s of SIGTERM", p.id)
		}
		p.proxy.close()
	}
}

// history is every worker's events.
func (h *harness) history() []event {
	var all []event
	for _, p := range h.all {
		evs, err := readLog(p.log)
		require.NoError(h.t, err)
		all = append(all, evs...)
	}
	return all
}

// stopped: the process is in state T (stopped by a signal).
func stopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'T'
}

func (h *harness) ctx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// waitGrantAfter waits until some worker (only, if not nil) was granted a
// lock after t, or until limit has passed.
func (h *harness) waitGrantAfter(t int64, limit time.Duration, only *proc) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for _, p := range h.all {
			if only != nil && p != only {
				continue
			}
			evs, _ := readLog(p.log)
			for i := len(evs) - 1; i >= 0 && evs[i].T > t; i-- {
				if evs[i].K == "got" {
					return
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pickHolder is a worker in a long hold, or nil when none came within 10 s:
// a holder fault that lands outside a hold exercises nothing its check
// could see (a random worker instead made those checks flaky under -race).
func (h *harness) pickHolder() *proc {
	return h.longHolder(10 * time.Second)
}

// inLongHold waits for a worker in a long hold with at least 1.25 leases
// to go, so that a fault of Redis injected now lands in a hold and across
// its renewals; false if none came (the fault is then not placed, and
// tried again later), which on a loaded machine with few grants a second
// is not rare.
func (h *harness) inLongHold() bool { return h.longHolder(10*time.Second) != nil }

// longHolder waits up to limit for a worker in a long hold with at least
// 1.25 leases to go.
func (h *harness) longHolder(limit time.Duration) *proc {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		procs := h.targets()
		h.mu.Unlock()
		var holding []*proc
		t := now() + int64(5*h.lease/4)
		for _, p := range procs {
			evs, _ := readLog(p.log)
			until := map[int]int64{}
			for _, e := range evs {
				switch e.K {
				case "long":
					until[e.C] = e.Val
				case "unl", "lost":
					until[e.C] = 0
				}
			}
			for _, u := range until {
				if u > t {
					holding = append(holding, p)
					break
				}
			}
		}
		if len(holding) > 0 {
			return holding[h.rng.IntN(len(holding))]
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
