package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/primitive"
)

// The workload of one node.
const (
	bankWorkers   = 4
	fairOwners    = 3
	configReaders = 2
	configWriters = 1
	consumers     = 2

	lockWait     = 5 * time.Second        // WaitTime of the local acquisitions
	bankHold     = 500 * time.Microsecond // between reading and writing the balances
	jobHold      = time.Millisecond       // between reading and writing a job counter
	writerStep   = 200 * time.Microsecond // between a writer's field updates
	readerHold   = 500 * time.Microsecond // a reader's time under the lock after its read
	readerPause  = 10 * time.Millisecond  // between a reader's reads, so writers get in
	writerPause  = 20 * time.Millisecond  // between a writer's updates
	leaderHold   = 100 * time.Millisecond // a survivor's turn as leader
	offerEvery   = 40 * time.Millisecond  // one delayed job per node this often
	gaugeEvery   = 200 * time.Millisecond
	sectionLimit = 10 * time.Second // bounds the Redis calls of a section, which run to their end after stop
)

// entry is a way into a critical section: the fencing tokens of its locks,
// whether it is still protected, and how to leave.
type entry struct {
	toks  []int64
	lost  func() error
	leave func(ctx context.Context) error
}

// heldSection is a section held open across calls (the victim's leader).
type heldSection struct {
	id uint64
	e  entry
}

func (n *node) startWork(ctx context.Context, wg *sync.WaitGroup, q *primitive.DelayedQueue) {
	for range bankWorkers {
		wg.Go(func() { n.bank(ctx) })
	}
	for o := range fairOwners {
		wg.Go(func() { n.fairOwner(ctx, o) })
	}
	for range configWriters {
		wg.Go(func() { n.configWriter(ctx) })
	}
	for range configReaders {
		wg.Go(func() { n.configReader(ctx) })
	}
	if !n.victim {
		wg.Go(func() { n.contendLeader(ctx) })
	}
	wg.Go(func() { n.produce(ctx, q) })
	wg.Go(func() { n.gauge(ctx) })
}

// startConsumers runs the delayed jobs' consumers, on every node but the
// victim: a killed consumer could take an item and die before reporting
// it, and the exactly-once check could not tell that from a loss.
func (n *node) startConsumers(ctx context.Context, wg *sync.WaitGroup) {
	if n.victim && n.cfg.kill {
		return
	}
	for range consumers {
		wg.Go(func() { n.consume(ctx) })
	}
}

// acquired sorts out an acquisition's error: true to go on into the
// section; otherwise it has been reported (a timeout, or an error after
// which the caller should pause).
func (n *node) acquired(ctx context.Context, kind string, err error) bool {
	switch {
	case err == nil:
		return true
	case ctx.Err() != nil && isCtxErr(err):
		// The workload is stopping; nothing is held.
	case errors.Is(err, actorlock.ErrNotAcquired):
		n.em.emit(event{T: "timeout", Kind: kind})
	default:
		n.fail(kind+" acquire", err)
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return false
}

// unsafeEntry lets everyone in (--unsafe): an INCR per lock stands in for
// the fencing token, so the checks have data to catch the overlaps with.
func (n *node) unsafeEntry(ctx context.Context, locks []string) (entry, error) {
	toks := make([]int64, len(locks))
	for i, l := range locks {
		t, err := n.rdb.Incr(ctx, ticketKey(l)).Result()
		if err != nil {
			return entry{}, err
		}
		toks[i] = t
	}
	return entry{toks: toks, lost: func() error { return nil }, leave: func(context.Context) error { return nil }}, nil
}

// lockEntry acquires one lock and waits as WaitTime says.
func (n *node) lockEntry(ctx context.Context, l *actorlock.Lock, wait time.Duration) (entry, error) {
	if n.cfg.unsafe {
		return n.unsafeEntry(ctx, []string{l.Name()})
	}
	n.waiting.Add(1)
	h, err := l.Acquire(ctx, actorlock.WaitTime(wait))
	n.waiting.Add(-1)
	if err != nil {
		return entry{}, err
	}
	return entry{toks: []int64{h.Token()}, lost: h.Err, leave: h.Unlock}, nil
}

func sectionCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	// Once in, finish even if the workload stops: a write cut off by
	// cancellation may or may not have happened.
	return context.WithTimeout(context.WithoutCancel(ctx), sectionLimit)
}

// ---- bank transfers under MultiLock --------------------------------------

func (n *node) bank(ctx context.Context) {
	// One handle per account for this worker: each handle is an owner, so
	// workers exclude each other instead of re-entering.
	locks := make([]*actorlock.Lock, n.cfg.accounts)
	for k := range locks {
		locks[k] = n.rt.Lock(acctLock(k))
	}
	for ctx.Err() == nil {
		a := rand.IntN(n.cfg.accounts)
		b := rand.IntN(n.cfg.accounts - 1)
		if b >= a {
			b++
		}
		names := []string{acctLock(a), acctLock(b)}
		asked := time.Now()
		var e entry
		var err error
		if n.cfg.unsafe {
			e, err = n.unsafeEntry(ctx, names)
		} else {
			e, err = n.multiEntry(ctx, locks[a], locks[b])
		}
		if !n.acquired(ctx, kindMulti, err) {
			continue
		}
		id := n.enter(kindMulti, names, e.toks, asked)
		sctx, cancel := sectionCtx(ctx)
		wrote, err := n.transfer(sctx, a, b, e.lost)
		n.leave(id, wrote)
		err = errors.Join(err, e.leave(sctx))
		cancel()
		if err != nil {
			n.fail("transfer", err)
		}
	}
}

// multiEntry acquires both accounts' locks as one MultiLock.
func (n *node) multiEntry(ctx context.Context, a, b *actorlock.Lock) (entry, error) {
	n.waiting.Add(1)
	g, err := actorlock.MultiLock(a, b).Acquire(ctx, actorlock.WaitTime(lockWait))
	n.waiting.Add(-1)
	if err != nil {
		return entry{}, err
	}
	// Members come in the MultiLock's global order: report the tokens in
	// the order of the names.
	toks := make([]int64, 2)
	for _, m := range g.Members() {
		if m.Name() == a.Name() {
			toks[0] = m.Token()
		} else {
			toks[1] = m.Token()
		}
	}
	return entry{toks: toks, lost: g.Err, leave: g.Unlock}, nil
}

// transfer moves a random amount from account a to b: read both balances,
// think, write both (one HSET, so a kill cannot break the total). Without
// the locks, a transfer in between is overwritten and money appears or
// vanishes.
func (n *node) transfer(ctx context.Context, a, b int, lost func() error) (bool, error) {
	vals, err := n.rdb.HMGet(ctx, bankKey, acctField(a), acctField(b)).Result()
	if err != nil {
		return false, err
	}
	ba, err1 := toInt(vals[0])
	bb, err2 := toInt(vals[1])
	if err := errors.Join(err1, err2); err != nil {
		return false, err
	}
	amount := min(int64(1+rand.IntN(100)), max(ba, 0))
	time.Sleep(bankHold)
	if err := lost(); err != nil {
		n.em.emit(event{T: "lost", L: []string{acctLock(a), acctLock(b)}, Msg: err.Error()})
		return false, nil // not protected any more: do not write
	}
	err = n.rdb.HSet(ctx, bankKey, acctField(a), ba-amount, acctField(b), bb+amount).Err()
	return err == nil, err
}

func toInt(v any) (int64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("balance %v is missing", v)
	}
	return strconv.ParseInt(s, 10, 64)
}

// ---- configuration under a read-write lock -------------------------------

func (n *node) configWriter(ctx context.Context) {
	wl := n.rt.ReadWriteLock(configLock).WriteLocker()
	for ctx.Err() == nil {
		asked := time.Now()
		e, err := n.lockEntry(ctx, wl, lockWait)
		if !n.acquired(ctx, kindWrite, err) {
			continue
		}
		id := n.enter(kindWrite, []string{configLock}, e.toks, asked)
		sctx, cancel := sectionCtx(ctx)
		wrote, err := n.writeConfig(sctx, e.lost)
		n.leave(id, wrote)
		err = errors.Join(err, e.leave(sctx))
		cancel()
		if err != nil {
			n.fail("config write", err)
		}
		sleepCtx(ctx, writerPause)
	}
}

// writeConfig sets every field to the next version, one command at a time.
// A value is "<version>:<node>": a torn read can tell whose write it saw
// half done.
func (n *node) writeConfig(ctx context.Context, lost func() error) (bool, error) {
	cur, err := n.rdb.HGet(ctx, configKey, "version").Result()
	if err != nil {
		return false, err
	}
	v, _ := parseConfigValue(cur)
	val := fmt.Sprintf("%d:%d", v+1, n.idx)
	for i := range configFields {
		if err := lost(); err != nil {
			n.em.emit(event{T: "lost", L: []string{configLock}, Msg: err.Error()})
			return false, nil
		}
		if err := n.rdb.HSet(ctx, configKey, cfgField(i), val).Err(); err != nil {
			return false, err
		}
		time.Sleep(writerStep)
	}
	err = n.rdb.HSet(ctx, configKey, "version", val).Err()
	return err == nil, err
}

// parseConfigValue splits "<version>:<node>".
func parseConfigValue(s string) (version int64, node int) {
	a, b, _ := strings.Cut(s, ":")
	version, _ = strconv.ParseInt(a, 10, 64)
	node, _ = strconv.Atoi(b)
	return version, node
}

func (n *node) configReader(ctx context.Context) {
	rl := n.rt.ReadWriteLock(configLock).ReadLocker()
	for ctx.Err() == nil {
		asked := time.Now()
		e, err := n.lockEntry(ctx, rl, lockWait)
		if !n.acquired(ctx, kindRead, err) {
			continue
		}
		id := n.enter(kindRead, []string{configLock}, e.toks, asked)
		sctx, cancel := sectionCtx(ctx)
		readAt := time.Now()
		m, err := n.rdb.HGetAll(sctx, configKey).Result()
		time.Sleep(readerHold)
		n.leave(id, err == nil)
		err = errors.Join(err, e.leave(sctx))
		cancel()
		if err != nil {
			n.fail("config read", err)
		} else {
			torn, writer := tornRead(m)
			n.em.emit(event{T: "read", At: readAt.UnixNano(), N: torn, Node: writer})
		}
		sleepCtx(ctx, readerPause)
	}
}

// tornRead is 1 if the fields of a configuration read differ, with the
// node whose write is the newest seen.
func tornRead(m map[string]string) (torn int64, writer int) {
	newest, _ := parseConfigValue(m["version"])
	for i := range configFields {
		f := m[cfgField(i)]
		if f != m["version"] {
			torn = 1
		}
		if v, node := parseConfigValue(f); v > newest {
			newest, writer = v, node
		}
	}
	return torn, writer
}

// ---- the leader lock ------------------------------------------------------

// takeLeader is the victim's: it takes the leader lock before the others
// start, and holds it until it is killed (or abdicates).
func (n *node) takeLeader(ctx context.Context) error {
	asked := time.Now()
	e, err := n.lockEntry(ctx, n.rt.Lock(leaderLock), 2*n.cfg.lease+time.Second)
	if err != nil {
		return err
	}
	id := n.enter(kindLeader, []string{leaderLock}, e.toks, asked)
	n.leaderMu.Lock()
	n.leader = &heldSection{id: id, e: e}
	n.leaderMu.Unlock()
	return nil
}

// abdicate releases the leader lock (--kill=false).
func (n *node) abdicate(ctx context.Context) {
	n.leaderMu.Lock()
	h := n.leader
	n.leader = nil
	n.leaderMu.Unlock()
	if h == nil {
		return
	}
	n.leave(h.id, true)
	sctx, cancel := sectionCtx(ctx)
	defer cancel()
	if err := h.e.leave(sctx); err != nil {
		n.fail("leader unlock", err)
	}
}

// contendLeader takes turns as leader: it waits for the lock as long as it
// takes (the victim's hold ends only with the victim's lease).
func (n *node) contendLeader(ctx context.Context) {
	l := n.rt.Lock(leaderLock)
	for ctx.Err() == nil {
		asked := time.Now()
		e, err := n.lockEntry(ctx, l, time.Hour)
		if !n.acquired(ctx, kindLeader, err) {
			continue
		}
		id := n.enter(kindLeader, []string{leaderLock}, e.toks, asked)
		time.Sleep(leaderHold)
		n.leave(id, true)
		sctx, cancel := sectionCtx(ctx)
		if err := e.leave(sctx); err != nil {
			n.fail("leader unlock", err)
		}
		cancel()
	}
}

// ---- delayed jobs --------------------------------------------------------

// produce offers a delayed job every offerEvery, with a random delay. The
// id is reported before the Offer (offering) and after it (offered), so
// that an item of a node killed in between is neither lost nor unknown.
func (n *node) produce(ctx context.Context, q *primitive.DelayedQueue) {
	tick := time.NewTicker(offerEvery)
	defer tick.Stop()
	for seq := 1; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		id := fmt.Sprintf("%s-n%d-%d", n.cfg.seed, n.idx, seq)
		delay := minDelay + rand.N(maxDelay-minDelay)
		n.em.emit(event{T: "offering", Job: id, At: time.Now().UnixNano(), D: int64(delay)})
		octx, cancel := sectionCtx(ctx)
		err := q.Offer(octx, []byte(id), delay)
		cancel()
		if err != nil {
			n.em.emit(event{T: "offerfail", Job: id, Msg: err.Error()})
			n.fail("offer", err)
			continue
		}
		n.em.emit(event{T: "offered", Job: id})
	}
}

func (n *node) consume(ctx context.Context) {
	bq := n.rt.BlockingQueue(queueName)
	for {
		v, err := bq.Take(ctx)
		switch {
		case ctx.Err() != nil:
			return // a Take cut short puts back what it got
		case err != nil:
			n.fail("take", err)
			sleepCtx(ctx, 100*time.Millisecond)
		default:
			n.em.emit(event{T: "dlv", Job: string(v), At: time.Now().UnixNano()})
		}
	}
}

// gauge reports how many owners wait for a lock.
func (n *node) gauge(ctx context.Context) {
	tick := time.NewTicker(gaugeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			n.em.emit(event{T: "gauge", N: 0})
			return
		case <-tick.C:
			n.em.emit(event{T: "gauge", N: n.waiting.Load()})
		}
	}
}

// newClient is a client of one server, or of a cluster.
func newClient(addrs []string, cluster bool) redis.UniversalClient {
	if cluster {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	}
	return redis.NewClient(&redis.Options{Addr: addrs[0]})
}
