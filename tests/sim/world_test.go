package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
	"github.com/actorlock/actorlock/primitive"
)

// config is one run, drawn from its seed (and narrowed by the shrinker).
type config struct {
	seed      uint64
	duration  time.Duration
	names     int
	runtimes  int
	workers   int // per runtime
	faultRate float64
	// faults and ops enabled (bit per kind); the shrinker clears bits.
	faultMask uint32
	opMask    uint32

	watchdog    time.Duration
	callTimeout time.Duration
	idle        time.Duration
	fairWait    time.Duration
	handoffs    int
	leaseMin    time.Duration
	leaseMax    time.Duration
	// readTimeouts per runtime slot: short ones make CLIENT PAUSE WRITE
	// fail calls (script never ran), long ones let replies come back late.
	readTimeouts []time.Duration
	tol          time.Duration
	// applyLag: how long after its reply comes back a renewal's
	// confirmation may take to reach the lock actor; sendSlack: how much
	// later than the runtime the hook may take a call's send time
	// (checkLoss; not used by the exclusion check, which has no tolerance).
	applyLag, sendSlack time.Duration
	// closeEvery: a runtime is closed and replaced mid-run this often (0: never).
	closeEvery time.Duration
	// adminEvery: the fault loop's period (pause, kill, pub/sub, restart).
	adminEvery time.Duration
	// known: issue 23's defects whose violations are counted, not failed
	// (SIM_KNOWN), to look past them on a library that has them.
	known map[int]bool
	// keepGoing (SIM_KEEP_GOING): count violations and go on to the end.
	keepGoing bool

	// The primitives (prim_test.go): names of each kind, and workers in
	// all (spread over the runtimes).
	primNames   [nPrimKinds]int
	primWorkers int
	// scenarioWorkers run aimed scenarios only (scenario_test.go), the
	// run's share kept for them whatever else it does; scenarioMask: the
	// scenario kinds drawn (SIM_SCENARIOS).
	scenarioWorkers int
	scenarioMask    uint32
}

func (c *config) faultOn(k int) bool { return c.faultMask&(1<<k) != 0 }
func (c *config) opOn(k int) bool    { return c.opMask&(1<<k) != 0 }
func (c *config) maxLease() time.Duration {
	return max(c.watchdog, c.leaseMax)
}

// drawConfig derives a run's shape from its seed.
func drawConfig(seed uint64, d time.Duration) *config {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	c := &config{
		seed:        seed,
		duration:    d,
		names:       60 + r.IntN(240),
		runtimes:    1 + r.IntN(3),
		workers:     48 + r.IntN(48), // in all; per runtime below
		faultRate:   0.06 + 0.06*r.Float64(),
		faultMask:   1<<nFaultKinds - 1,
		opMask:      1<<nOps - 1,
		watchdog:    time.Duration(1000+r.IntN(500)) * time.Millisecond,
		callTimeout: 3 * time.Second,
		idle:        time.Duration(10+r.IntN(290)) * time.Millisecond,
		fairWait:    time.Second,
		handoffs:    r.IntN(9),
		leaseMin:    400 * time.Millisecond,
		leaseMax:    1500 * time.Millisecond,
		// How late a timer or a reply may be: CI and developers run
		// this beside other work on two cores, where a stall of a second
		// was seen on top of the documented bounds (a fair waiter's
		// answer held for its leave, a won grant given back).
		tol:        2 * time.Second,
		applyLag:   150 * time.Millisecond,
		sendSlack:  20 * time.Millisecond,
		adminEvery: time.Duration(300+r.IntN(700)) * time.Millisecond,
	}
	if raceEnabled {
		c.tol = 3 * time.Second
		c.applyLag, c.sendSlack = 250*time.Millisecond, 50*time.Millisecond
		c.workers /= 2
	}
	// Workers mostly wait (on a held name, or on Redis): the CPU is not
	// what bounds operations a minute, so a run has many.
	c.workers = max(c.workers/c.runtimes, 4)
	// Enough names that most acquisitions do not wait (a waiting worker
	// does nothing else), few enough that some do: about two names per
	// hold the workers keep (each keeps up to maxHolds, 1.5 on average).
	c.names = max(c.names, 3*c.runtimes*c.workers)
	for i := 0; i < c.runtimes; i++ {
		// Below the call timeout, so that a call's own bound is the
		// runtime's (WithCallTimeout) whatever the client does.
		rt := 2500 * time.Millisecond
		if r.IntN(2) == 0 {
			rt = 300 * time.Millisecond
		}
		c.readTimeouts = append(c.readTimeouts, rt)
	}
	// A restart without persistence is unsafe (locks vanish): one seed in
	// three has it.
	if r.IntN(3) != 0 {
		c.faultMask &^= 1 << fRestart
	}
	if r.IntN(2) == 0 {
		c.closeEvery = time.Duration(5+r.IntN(10)) * time.Second
	}
	// Drawn last, so that the lock workload's shape stays what it was.
	c.primNames = [nPrimKinds]int{pQueue: 1 + r.IntN(2), pSemaphore: 1 + r.IntN(2), pExpirable: 1, pLatch: 1 + r.IntN(2)}
	c.primWorkers = 8 + r.IntN(8)
	if raceEnabled {
		c.primWorkers /= 2
	}
	// Enough to keep most scenario names busy: each scenario has a name
	// of its own kind reserved while it runs (scenarioNames per kind).
	c.scenarioWorkers = 3 + r.IntN(2)
	c.scenarioMask = 1<<nScenarios - 1
	return c
}

func (c *config) String() string {
	var faults, ops []string
	for k := 0; k < nFaultKinds; k++ {
		if c.faultOn(k) {
			faults = append(faults, faultNames[k])
		}
	}
	for k := 0; k < nOps; k++ {
		if c.opOn(k) {
			ops = append(ops, opNames[k])
		}
	}
	var prims []string
	for k, n := range c.primNames {
		prims = append(prims, fmt.Sprintf("%d %s", n, primKindNames[k]))
	}
	return fmt.Sprintf("seed %d: %d names, %d runtimes x %d workers, watchdog %v, idle %v, hand-offs %d, read timeouts %v, close every %v, fault rate %.1f%%\n  primitives: %s, %d workers\n  faults: %s\n  ops: %s",
		c.seed, c.names, c.runtimes, c.workers, c.watchdog, c.idle, c.handoffs, c.readTimeouts, c.closeEvery, 100*c.faultRate,
		strings.Join(prims, ", "), c.primWorkers, strings.Join(faults, " "), strings.Join(ops, " "))
}

// world is one run: a redis-server, runtimes in slots, the model.
type world struct {
	cfg   *config
	start time.Time
	srv   *redisserver.Server
	admin *redis.Client // the checker's and the fault loop's: no faults
	// late: the connection late duplicates reach Redis by (fLateDup);
	// dups: those still on their way.
	late  *redis.Client
	dups  sync.WaitGroup
	slots []*slot
	model *model

	ctx    context.Context // ends when the run should stop
	cancel context.CancelFunc

	faultsOn     atomic.Bool
	calls        atomic.Int64
	faultedCalls atomic.Int64
	ops          atomic.Int64
	// unforced: calls that failed with no fault injected (countUnforced).
	unforced atomic.Int64
	// scenarios: started, and judged (no fault on the way), by kind.
	scenarios, judged [nScenarios]atomic.Int64
	faultCount        [nFaultKinds]atomic.Int64

	primOps atomic.Int64
	primSync
}

// slot is a runtime position; Close mid-run replaces its runtime (gen+1).
type slot struct {
	idx int
	mu  sync.RWMutex
	gen int
	rt  *actorlock.Runtime
	rdb *redis.Client
	f   *faults
}

// current is the slot's runtime and its generation.
func (s *slot) current() (*actorlock.Runtime, int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rt, s.gen
}

func (w *world) stop() { w.cancel() }

func (w *world) countFault(kind int, names []string, desc string) { w.count(kind, names, desc, true) }

// countAimed counts a fault a scenario aimed, which leaves the names'
// lastFault alone: the scenario judges what follows it.
func (w *world) countAimed(kind int, names []string, desc string) { w.count(kind, names, desc, false) }

// countUnforced counts a call that failed with no fault injected, and
// marks the names it touched as faulted (every name's, if none).
func (w *world) countUnforced(names []string, desc string) {
	w.unforced.Add(1)
	w.mark(names, desc, true)
}

// count counts an injected fault and marks the names it touched (marks:
// their lastFault too).
func (w *world) count(kind int, names []string, desc string, marks bool) {
	w.faultCount[kind].Add(1)
	w.faultedCalls.Add(1)
	w.mark(names, desc, marks)
}

// mark records a fault in the histories of names; moves: it moves their
// lastFault (every name's, if none: a connection killed, Redis paused or
// restarted).
func (w *world) mark(names []string, desc string, moves bool) {
	if len(desc) > 300 {
		desc = desc[:300] + "…"
	}
	m := w.model
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(names) == 0 && moves {
		m.lastFault = time.Now()
		return
	}
	for i, name := range names {
		if slices.Contains(names[:i], name) {
			continue // a name and its {name} keys
		}
		if n := m.historyOf(name); n != nil {
			n.record(-1, "fault: %s", desc)
			if moves {
				n.lastFault = time.Now()
			}
		}
	}
}

// newRuntime starts the runtime of slot s: a client of its own, whose
// address names the slot so that RedLock sees the slots as distinct
// servers (each RedLock member uses its own names, so no key is shared).
func (w *world) newRuntime(s *slot) error {
	c := w.cfg
	f := newFaults(w, s.idx, c.seed+uint64(s.gen)*131, c.readTimeouts[s.idx])
	addr := w.srv.Addr
	rdb := redis.NewClient(&redis.Options{
		Addr: fmt.Sprintf("sim-slot-%d:%d", s.idx, w.srv.Port),
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		ReadTimeout:  c.readTimeouts[s.idx],
		WriteTimeout: c.readTimeouts[s.idx],
		DialTimeout:  time.Second,
		PoolSize:     32,
	})
	rdb.AddHook(f)
	rt, err := actorlock.New(rdb,
		actorlock.WithWatchdog(c.watchdog), actorlock.WithIdleTimeout(c.idle), actorlock.WithCallTimeout(c.callTimeout),
		actorlock.WithFairWaitTimeout(c.fairWait), actorlock.WithMaxHandoffs(c.handoffs),
		actorlock.WithLogger(slog.New(&runtimeLog{w: w, slot: s.idx})))
	if err != nil {
		_ = rdb.Close()
		return err
	}
	s.rt, s.rdb, s.f = rt, rdb, f
	return nil
}

func (w *world) listHeld() []listedHold {
	var out []listedHold
	for _, s := range w.slots {
		s.mu.RLock()
		for _, h := range s.rt.Held() {
			out = append(out, listedHold{slot: s.idx, h: h})
		}
		s.mu.RUnlock()
	}
	return out
}

// result is what a run measured, and its first violation.
type result struct {
	v          *violation
	elapsed    time.Duration
	ops        int64
	calls      int64
	faulted    int64
	faultKinds [nFaultKinds]int64
	closes     int
	scenarios  [nScenarios][2]int64 // by kind: started, judged
	unforced   int64
	known      int
	// primOps: calls on the primitives; quiets: their quiet points judged.
	primOps, quiets int64
}

func (r *result) String() string {
	min := r.elapsed.Minutes()
	var kinds []string
	for k, n := range r.faultKinds {
		if n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", faultNames[k], n))
		}
	}
	var scenarios []string
	for k, n := range r.scenarios {
		scenarios = append(scenarios, fmt.Sprintf("%s %d/%d", scenarioKinds[k], n[1], n[0]))
	}
	return fmt.Sprintf("%.1fs: %d ops (%.0f ops/min) and %d on the primitives (%d quiet points judged), %d Redis calls, %d faulted (%.1f%%, %.0f faults/min; %s), %d mid-run closes, %d calls failed unforced; scenarios judged/started: %s",
		r.elapsed.Seconds(), r.ops, float64(r.ops)/min, r.primOps, r.quiets, r.calls, r.faulted, 100*float64(r.faulted)/max(float64(r.calls), 1),
		float64(r.faulted)/min, strings.Join(kinds, ", "), r.closes, r.unforced, strings.Join(scenarios, ", "))
}

// runWorld runs one simulation and returns what it found.
func runWorld(c *config, logf func(string, ...any)) (*result, error) {
	ignore := goleak.IgnoreCurrent()
	srv, err := redisserver.Start()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	w := &world{cfg: c, srv: srv, start: time.Now()}
	w.ctx, w.cancel = context.WithTimeout(context.Background(), c.duration)
	defer w.cancel()
	w.admin = redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 5 * time.Second, PoolSize: 8})
	defer w.admin.Close()
	w.late = redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 5 * time.Second, PoolSize: 4, MaxRetries: -1})
	defer w.late.Close()
	w.model = newModel(w)
	prefix := fmt.Sprintf("sim%d", c.seed)
	for i := 0; i < c.names; i++ {
		k := i % 3
		w.model.addName(fmt.Sprintf("%s:%s:%d", prefix, kindNames[k], i), k, false)
	}
	for i := 0; i < scenarioNames; i++ {
		for _, k := range []int{kLock, kFair, kRW} {
			w.model.addName(fmt.Sprintf("%s:scenario:%s:%d", prefix, kindNames[k], i), k, true)
		}
	}
	w.model.addPrims(c, prefix)
	w.dqs = map[string]*primitive.DelayedQueue{}
	for i := 0; i < c.runtimes; i++ {
		s := &slot{idx: i}
		if err := w.newRuntime(s); err != nil {
			return nil, err
		}
		w.slots = append(w.slots, s)
	}
	if err := w.setPermits(w.ctx, rand.New(rand.NewPCG(c.seed, 0x5e7))); err != nil {
		return nil, err
	}
	w.faultsOn.Store(true)
	res := &result{}

	var wg sync.WaitGroup
	workers := make([]*worker, 0, c.runtimes*c.workers)
	for _, s := range w.slots {
		for j := 0; j < c.workers; j++ {
			wk := newWorker(w, s, len(workers))
			workers = append(workers, wk)
			wg.Add(1)
			go func() { defer wg.Done(); wk.run() }()
		}
	}
	// The primitives' workers (numbered after the lock workers), and a
	// warden per primitive name.
	var primWorkers []*primWorker
	for i := 0; i < c.primWorkers && len(w.model.primList) > 0; i++ {
		pw := newPrimWorker(w, w.slots[i%len(w.slots)], len(workers)+i)
		primWorkers = append(primWorkers, pw)
		wg.Add(1)
		go func() { defer wg.Done(); pw.run() }()
	}
	// The scenario workers, numbered after those.
	for i := 0; i < c.scenarioWorkers && c.opOn(opScenario); i++ {
		wk := newWorker(w, w.slots[i%len(w.slots)], len(workers)+c.primWorkers+i)
		wk.scenarios = true
		workers = append(workers, wk)
		wg.Add(1)
		go func() { defer wg.Done(); wk.run() }()
	}
	var wardens sync.WaitGroup
	for i, p := range w.model.primList {
		wardens.Add(1)
		go func() { defer wardens.Done(); w.warden(p, i) }()
	}
	var bg sync.WaitGroup
	bg.Add(3)
	go func() { defer bg.Done(); w.faultLoop(res) }()
	sweepDone := make(chan struct{})
	go func() { defer bg.Done(); w.watchPauses(sweepDone) }()
	go func() {
		defer bg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sweepDone:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				w.model.sweep(ctx)
				cancel()
			}
		}
	}()
	<-w.ctx.Done()
	res.elapsed = time.Since(w.start)
	// Quiescence: no more faults, every worker releases what it holds.
	w.faultsOn.Store(false)
	wg.Wait()
	wardens.Wait()
	for _, p := range w.model.primList {
		p.closed.Store(false)
	}
	// Late duplicates still on their way land before the drain.
	w.dups.Wait()
	// A violation waiting for its grace is the run's (its checks go on
	// through the drain and Close, with nothing else to wait for).
	w.model.settlePending()
	res.ops = w.ops.Load()
	res.unforced = w.unforced.Load()
	for k := range res.scenarios {
		res.scenarios[k] = [2]int64{w.scenarios[k].Load(), w.judged[k].Load()}
	}
	res.calls, res.faulted = w.calls.Load(), w.faultedCalls.Load()
	for k := range res.faultKinds {
		res.faultKinds[k] = w.faultCount[k].Load()
	}
	drain := time.Now()
	for _, wk := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); wk.drain() }()
	}
	for _, pw := range primWorkers {
		wg.Add(1)
		go func() { defer wg.Done(); pw.drain() }()
	}
	wg.Wait()
	logf("drained in %v", time.Since(drain).Round(time.Millisecond))
	close(sweepDone)
	bg.Wait()
	if v := w.finish(ignore); v != nil {
		logf("at the end: %v", v)
		if w.model.first == nil {
			w.model.first = v
		}
	}
	for _, inv := range w.model.order {
		logf("%d violations of %q; the first:\n%v", w.model.byInvariant[inv], inv, w.model.firstOf[inv])
		if w.model.first == nil {
			w.model.first = w.model.firstOf[inv]
		}
	}
	res.v = w.model.first
	res.primOps = w.primOps.Load()
	for _, p := range w.model.primList {
		res.quiets += int64(p.quiets)
	}
	for d, k := range w.model.knownSeen {
		logf("known %s: %d violations of its shape; the first:\n%v", defectName(d), k, w.model.knownFirst[d])
		res.known += k
	}
	return res, nil
}

// faultLoop lands the faults that are not per call: CLIENT PAUSE WRITE,
// killed connections, slow pub/sub, restarts, a runtime closed mid-run.
func (w *world) faultLoop(res *result) {
	c := w.cfg
	r := rand.New(rand.NewPCG(c.seed, 0xfa17))
	t := time.NewTicker(c.adminEvery)
	defer t.Stop()
	nextClose := time.Now().Add(c.closeEvery)
	restarts := 0
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		if c.closeEvery > 0 && time.Now().After(nextClose) {
			nextClose = time.Now().Add(c.closeEvery)
			w.closeMidRun(w.slots[r.IntN(len(w.slots))])
			res.closes++
		}
		s := w.slots[r.IntN(len(w.slots))]
		switch k := r.IntN(10); {
		case k < 3 && c.faultOn(fKillConn):
			s.mu.RLock()
			if s.f.killConn(r.IntN(2) == 0) {
				w.countFault(fKillConn, nil, "")
			}
			s.mu.RUnlock()
		case k < 5 && c.faultOn(fPubSubSlow):
			s.mu.RLock()
			s.f.slowPubSub(time.Duration(200+r.IntN(1500)) * time.Millisecond)
			s.mu.RUnlock()
			w.countFault(fPubSubSlow, nil, "")
		case k < 7 && c.faultOn(fPauseWrite):
			ms := 100 + r.IntN(1400)
			if err := w.admin.Do(w.ctx, "CLIENT", "PAUSE", ms, "WRITE").Err(); err == nil {
				w.countFault(fPauseWrite, nil, "")
				w.model.note("fault: CLIENT PAUSE WRITE %dms", ms)
				w.model.stall(time.Now().Add(time.Duration(ms)*time.Millisecond + c.maxLease()))
			}
		case k == 7 && c.faultOn(fRestart) && restarts < 2 && r.IntN(4) == 0:
			restarts++
			from := time.Now()
			// Counted before and after: a read of the primitives that
			// overlaps the restart sees the count change.
			w.model.mu.Lock()
			w.model.restartSeq++
			w.model.mu.Unlock()
			err := w.srv.Restart()
			w.countFault(fRestart, nil, "")
			w.model.note("fault: redis-server restarted without persistence (%v)", err)
			w.model.mu.Lock()
			// Holds granted before it may overlap holds granted after,
			// until the older ones' leases are over (README: unsafe).
			w.model.restarts = append(w.model.restarts, interval{from, time.Now().Add(c.maxLease() + c.tol)})
			w.model.stalls = append(w.model.stalls, interval{from, time.Now().Add(c.maxLease() + c.tol)})
			for _, n := range w.model.list {
				n.restarts = w.model.restarts
			}
			w.model.restartSeq++
			w.model.mu.Unlock()
		}
	}
}

// stall records a window in which waiters cannot be served.
func (m *model) stall(until time.Time) {
	m.mu.Lock()
	m.stalls = append(m.stalls, interval{time.Now(), until})
	m.mu.Unlock()
}

// note records a global event in every name's history.
func (m *model) note(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.list {
		n.record(-1, format, args...)
	}
	for _, p := range m.primList {
		p.record(-1, format, args...)
	}
}

// closeMidRun closes slot s's runtime while its workers use it, and starts
// a new one in its place: every Held of the old one ends.
func (w *world) closeMidRun(s *slot) {
	s.mu.Lock()
	old, oldRdb, oldGen := s.rt, s.rdb, s.gen
	s.gen++
	err := w.newRuntime(s)
	s.mu.Unlock()
	if err != nil {
		w.model.mu.Lock()
		w.model.fail("a runtime starts", nil, nil, "New: %v", err)
		w.model.mu.Unlock()
		return
	}
	w.model.mu.Lock()
	w.model.closing[[2]int{s.idx, oldGen}] = time.Now()
	w.model.mu.Unlock()
	w.model.note("runtime %d (gen %d) closing mid-run", s.idx, oldGen)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := w.model.begin(-1, "Close", "", 10*time.Second+w.cfg.tol)
	err = old.Close(ctx)
	w.model.end(id)
	defer oldRdb.Close()
	m := w.model
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		m.note2("runtime %d Close: %v", s.idx, err)
	}
	for _, n := range m.list {
		for _, h := range n.holds {
			if h.slot == s.idx && h.gen == oldGen && h.live() && !doneNow(h) {
				m.failKnown(knownLost(n, h), "Close ends every Held", n, []string{h.field}, "token %d of the closed runtime %d still open after Close returned (%v)", h.h.Token(), s.idx, err)
			}
		}
	}
}

func (m *model) note2(format string, args ...any) {
	for _, n := range m.list {
		n.record(-1, format, args...)
	}
}

// knownLost: a Held that an Unlock or Extend already called lost, in one
// of the shapes of defects 2 and 5, is forgotten by the runtime (Close
// does not end it either).
func knownLost(n *nameState, h *hold) int {
	if h.toldLost.IsZero() {
		return 0
	}
	return known5(n, h)
}

// staleFairQueue: a fair lock's queue whose every place has timed out (by
// the Redis clock) is what a waiter whose leave failed (a fault) leaves
// behind: as in Redisson, the next acquisition of the name purges it, and
// until then it holds nobody up. Such keys are not counted as left.
func (w *world) staleFairQueue(ctx context.Context, key string) bool {
	var timeouts string
	switch {
	case strings.HasPrefix(key, "redisson_lock_timeout:"):
		timeouts = key
	case strings.HasPrefix(key, "redisson_lock_queue:"):
		timeouts = "redisson_lock_timeout:" + strings.TrimPrefix(key, "redisson_lock_queue:")
	default:
		return false
	}
	now, err := w.admin.Time(ctx).Result()
	if err != nil {
		return false
	}
	places, err := w.admin.ZRangeWithScores(ctx, timeouts, 0, -1).Result()
	if err != nil || len(places) == 0 {
		return false
	}
	for _, p := range places {
		if int64(p.Score) > now.UnixMilli() {
			return false
		}
	}
	if key != timeouts {
		// Every queued owner has a timed-out place.
		queued, err := w.admin.LRange(ctx, key, 0, -1).Result()
		if err != nil {
			return false
		}
		for _, o := range queued {
			found := false
			for _, p := range places {
				found = found || p.Member == o
			}
			if !found {
				return false
			}
		}
	}
	return true
}

// finish closes everything and checks that nothing is left: no Held open,
// no lock key in Redis, no goroutine.
func (w *world) finish(ignore goleak.Option) *violation {
	c := w.cfg
	m := w.model
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// Let a CLIENT PAUSE end.
	_ = w.admin.Do(ctx, "CLIENT", "UNPAUSE").Err()
	// What the primitives still do in the background (settling, give-backs)
	// ends before Close, which would cut it short.
	w.primsQuiet(3 * c.callTimeout)
	for _, s := range w.slots {
		if err := s.rt.Close(ctx); err != nil && m.first == nil {
			return &violation{invariant: "Close succeeds after quiescence", detail: err.Error(), at: time.Since(w.start)}
		}
	}
	m.mu.Lock()
	for _, n := range m.list {
		for _, h := range n.holds {
			if h.live() && !doneNow(h) {
				m.failKnown(knownLost(n, h), "Close ends every Held", n, []string{h.field}, "token %d still open after Close", h.h.Token())
			}
		}
	}
	m.mu.Unlock()
	for _, s := range w.slots {
		_ = s.rdb.Close()
	}
	if m.first != nil {
		return m.first
	}
	// The primitives, every runtime closed: nothing of theirs is in flight.
	w.finalPrims(ctx)
	if m.first != nil {
		return m.first
	}
	// Lock keys: none once Close released everything; latches expire
	// within the call timeout, a hold orphaned by a fault within a lease.
	deadline := time.Now().Add(c.callTimeout + c.maxLease() + c.tol)
	var left []string
	for {
		keys, err := w.admin.Keys(ctx, "*").Result()
		left = left[:0]
		if err == nil {
			for _, k := range keys {
				// Fencing counters expire on their own a minute after
				// the name's last acquisition, a runtime's record (host
				// and pid for the CLI) 30 s after its last refresh: a
				// runtime closed mid-run under faults may not have
				// deleted it.
				// A request's guard (scripts.Guard) expires a few call
				// timeouts after its request: Close deletes only those it
				// knows no attempt can still arrive for.
				if !strings.HasPrefix(k, "redisson_lock_token:") && !strings.HasPrefix(k, "actorlock_runtime:") &&
					!strings.HasPrefix(k, "actorlock_request:") && !w.staleFairQueue(ctx, k) {
					left = append(left, k)
				}
			}
		}
		if err == nil && len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		v := &violation{invariant: "after quiescence and Close, Redis holds no lock keys", at: time.Since(w.start), detail: fmt.Sprintf("%d keys left, e.g. %v", len(left), left[:min(len(left), 5)])}
		for _, k := range left {
			for name, n := range m.names {
				if strings.Contains(k, name) {
					v.name, v.history = name, n.history(w.start)
				}
			}
			if v.name != "" {
				break
			}
		}
		return v
	}
	_ = w.admin.Close()
	_ = w.srv.Close()
	if err := goleak.Find(ignore); err != nil {
		return &violation{invariant: "Close leaves no goroutine running", detail: err.Error(), at: time.Since(w.start)}
	}
	return nil
}

// sendLater sends copies of cmds to Redis after delay, on a connection of
// their own (fLateDup): the runtime was told the call timed out, and may
// have tried it again meanwhile. moves: its landing moves the names'
// lastFault (not for a fault a scenario aimed: it judges what follows).
func (w *world) sendLater(cmds []redis.Cmder, names []string, desc string, delay time.Duration, moves bool) {
	args := make([][]any, len(cmds))
	for i, c := range cmds {
		args[i] = append([]any(nil), c.Args()...)
	}
	w.dups.Add(1)
	landed := w.primDups(cmds)
	go func() {
		defer w.dups.Done()
		defer landed()
		time.Sleep(delay)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pipe := w.late.Pipeline()
		copies := make([]redis.Cmder, len(args))
		for i, a := range args {
			copies[i] = pipe.Do(ctx, a...)
		}
		_, err := pipe.Exec(ctx)
		w.holdCalls(copies, fmt.Sprintf("late duplicate, %v after it was sent", delay))
		w.permitCalls(copies, fmt.Sprintf("late duplicate, %v after it was sent:", delay))
		w.mark(names, fmt.Sprintf("late duplicate of [%s] reached Redis, %v after it was sent (%s)", desc, delay, errKind(err)), moves)
	}()
}

// watchPauses records when this process stood still (a goroutine that
// asks to wake every 10 ms woke 100 ms late or more): a stop-the-world
// pause or a starved scheduler holds the runtimes' timers and calls too, as
// a paused holder process's (checkLoss).
func (w *world) watchPauses(stop <-chan struct{}) {
	const every, late = 10 * time.Millisecond, 100 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			now := time.Now()
			if now.Sub(last) > every+late {
				m := w.model
				m.mu.Lock()
				if m.pauses = append(m.pauses, interval{last, now}); len(m.pauses) > 64 {
					m.pauses = m.pauses[len(m.pauses)-64:]
				}
				m.mu.Unlock()
			}
			last = now
		}
	}
}
