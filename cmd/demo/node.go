package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/actorkit"
	"github.com/actorlock/actorlock/remoting"
)

// closeTimeout bounds closing a node's runtime (releasing what it holds,
// stopping remote: up to about 4 s with a peer that cannot be reached).
const closeTimeout = 15 * time.Second

// node is one node process: one runtime with remote, and its workload.
type node struct {
	cfg    config
	idx    int
	victim bool
	rt     *actorlock.Runtime
	rdb    redis.UniversalClient
	em     *emitter
	peers  *peers

	waiting atomic.Int64  // owners waiting for a lock right now
	ids     atomic.Uint64 // section ids

	leaderMu sync.Mutex
	leader   *heldSection // the victim's leader lock, until it abdicates
}

// runNode is a node process: it reports on stdout and takes commands on
// stdin (see command); it exits when stdin says quit or ends.
func runNode(ctx context.Context, cfg config, std stdio) int {
	// The orchestrator decides when to stop. Nodes run in a process group
	// of their own, so a terminal's Ctrl-C does not reach them; a SIGINT
	// sent to them all the same must not cut a critical section short.
	signal.Ignore(os.Interrupt)
	em := &emitter{enc: json.NewEncoder(std.out)}
	rdb := newClient(splitAddrs(cfg.redis), cfg.nodeCluster)
	defer rdb.Close()
	rt, err := actorlock.New(rdb,
		actorlock.WithWatchdog(cfg.lease),
		// A fair-lock waiter whose node died blocks the queue at most this
		// long: the same bound as a dead holder.
		actorlock.WithFairWaitTimeout(cfg.lease),
		remoting.WithRemote(remoting.Config{}))
	if err != nil {
		fmt.Fprintf(std.err, "demo: node %d: %v\n", cfg.node, err)
		return exitFail
	}
	n := &node{cfg: cfg, idx: cfg.node, victim: cfg.node == cfg.nodes-1, rt: rt, rdb: rdb, em: em}
	n.run(ctx, readCommands(std.in, n))
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if err := rt.Close(cctx); err != nil {
		n.fail("close", err)
		return exitFail
	}
	if em.broken.Load() {
		return exitFail
	}
	return exitPass
}

func (n *node) run(ctx context.Context, cmds <-chan command) {
	// The victim holds the leader lock before anyone contends for it.
	if n.victim {
		if err := n.takeLeader(ctx); err != nil {
			n.fail("leader", err)
		}
	}
	// The delayed queue's mover runs while a handle is open: keep one open
	// until the end, so that items of a killed node are moved too.
	q := n.rt.DelayedQueue(queueName)
	defer q.Close()
	n.em.emit(event{T: "ready", Addr: actorkit.RemoteAddress(n.rt), PID: os.Getpid()})

	first, ok := <-cmds
	if !ok {
		return
	}
	if first.Cmd != "peers" || len(first.Peers) != n.cfg.nodes {
		n.fail("start", fmt.Errorf("expected the peer list, got %q", first.Cmd))
		return
	}
	n.peers = newPeers(n.idx, first.Peers)

	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	consumeCtx, stopConsume := context.WithCancel(ctx)
	defer stopConsume()
	var work, consume sync.WaitGroup
	n.startWork(workCtx, &work, q)
	n.startConsumers(consumeCtx, &consume)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopWork()
			work.Wait()
			n.abdicate(ctx) // the victim's leader lock, if it still holds it
			n.em.emit(event{T: "stopped"})
		}
	}
	defer func() {
		stop()
		stopConsume()
		consume.Wait()
	}()
	for c := range cmds {
		switch c.Cmd {
		case "dead":
			n.peers.markDead(c.Node)
		case "abdicate":
			n.abdicate(ctx)
		case "stop":
			stop()
		case "quit":
			return
		}
	}
}

// readCommands passes the orchestrator's commands on until stdin ends
// (the orchestrator closed it, or died).
func readCommands(in io.Reader, n *node) <-chan command {
	ch := make(chan command)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var c command
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				n.fail("command", err)
				continue
			}
			ch <- c
		}
	}()
	return ch
}

// emitter writes events as JSON lines, each with one write: a line is in
// the pipe before the call returns, so a SIGKILL right after it loses
// nothing that was reported.
type emitter struct {
	mu     sync.Mutex
	enc    *json.Encoder
	broken atomic.Bool
}

func (e *emitter) emit(ev event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.enc.Encode(ev); err != nil {
		e.broken.Store(true) // the orchestrator is gone; stdin tells us too
	}
}

func (n *node) fail(what string, err error) {
	n.em.emit(event{T: "err", Msg: fmt.Sprintf("node %d: %s: %v", n.idx, what, err)})
}

// enter reports a critical section as entered: the locks, their tokens,
// when it was asked for. It returns the section's id for leave.
func (n *node) enter(kind string, locks []string, toks []int64, asked time.Time) uint64 {
	id := n.ids.Add(1)
	n.em.emit(event{T: "acq", ID: id, Kind: kind, L: locks, Tok: toks, W: asked.UnixNano(), At: time.Now().UnixNano()})
	return id
}

// leave reports the end of a section; it is called before the unlock.
func (n *node) leave(id uint64, wrote bool) {
	ev := event{T: "rel", ID: id, At: time.Now().UnixNano()}
	if wrote {
		ev.N = 1
	}
	n.em.emit(ev)
}

// peers are the nodes' remote addresses, and which are known dead.
type peers struct {
	self  int
	addrs []string
	dead  []chan struct{}
	once  []sync.Once
}

func newPeers(self int, addrs []string) *peers {
	p := &peers{self: self, addrs: addrs, dead: make([]chan struct{}, len(addrs)), once: make([]sync.Once, len(addrs))}
	for i := range p.dead {
		p.dead[i] = make(chan struct{})
	}
	return p
}

func (p *peers) markDead(i int) {
	if i >= 0 && i < len(p.dead) {
		p.once[i].Do(func() { close(p.dead[i]) })
	}
}

func (p *peers) isDead(i int) bool {
	select {
	case <-p.dead[i]:
		return true
	default:
		return false
	}
}

// pick is the next live node after this one, in ring order (this one if
// no other is alive).
func (p *peers) pick(skip int) int {
	for d := 1; d < len(p.addrs); d++ {
		i := (p.self + d) % len(p.addrs)
		if i != skip && !p.isDead(i) {
			return i
		}
	}
	return p.self
}

// sleepCtx sleeps d unless ctx ends first; false if it did.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
