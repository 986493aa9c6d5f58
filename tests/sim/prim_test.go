package sim

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/primitive"
)

// The primitives' workload (issue 33): blocking and delayed queues, plain
// and permit-expirable semaphores and count-down latches, driven by workers
// of their own beside the lock workload, on the same runtimes and under the
// same faults. Every call is entered in its name's ledger with what its
// outcome says it did: it acted, it did nothing, or it may have acted (an
// error after which neither the library nor the caller can know). The
// checks (primcheck_test.go) hold Redis, read directly, to the ledger: at
// quiet points of each name and at the end.

// Kinds of primitive names.
const (
	pQueue     = iota // a blocking queue and the delayed queue in front of it: one list
	pSemaphore        // a plain semaphore
	pExpirable        // a permit-expirable semaphore
	pLatch            // a count-down latch
	nPrimKinds
)

var primKindNames = [nPrimKinds]string{"queue", "semaphore", "expirable", "latch"}

// primState is the model of one primitive name.
type primState struct {
	name string
	kind int
	// hist is its history (a nameState that is not a lock name: the lock
	// sweep never reads it).
	hist *nameState

	// The gate: workers call on the name only while it is open; the
	// name's warden closes it for a quiet point (quiesce).
	closed atomic.Bool
	ops    atomic.Int32
	// Redis activity on the name, as the hooks see it: commands in flight,
	// late duplicates on their way, and when either last changed (unix ns).
	calls, dups atomic.Int32
	lastCall    atomic.Int64
	seq         atomic.Int64

	// The ledgers (m.mu), one per kind.
	q *queueLedger
	s *semLedger
	x *xsemLedger
	l *latchLedger
	// quiets: quiet points judged; restarts: the model's restartSeq its
	// ledger counts from.
	quiets, restarts int
}

// enter lets a worker call on p while its gate is open; leave ends that.
func (p *primState) enter() bool {
	if p.closed.Load() {
		return false
	}
	p.ops.Add(1)
	if p.closed.Load() {
		p.ops.Add(-1)
		return false
	}
	return true
}

func (p *primState) leave() { p.ops.Add(-1) }

// A queue item's offer and removal, as their calls returned.
const (
	offerPending = iota // the Offer has not returned
	offerDone           // it returned nil: the item was stored once
	offerMaybe          // it failed in a way that may have stored it (once)
)

const (
	removeNone  = iota
	removeDone  // Remove returned true
	removeMaybe // Remove failed in a way that may have removed it
)

type queueItem struct {
	offer     int
	delayed   bool // offered to the delayed queue
	delivered int  // Take, Poll or the delayed queue's Poll returned it
	removed   int
}

// queueLedger: every item offered to a queue (payloads are unique), until
// a quiet point finds it delivered, removed, or never stored.
type queueLedger struct {
	items map[string]*queueItem
	// ended: items that left the ledger, and how; an item seen again
	// after that is a duplicate.
	ended map[string]string
	// lossBudget: the delayed queue's Polls since the last quiet point that
	// failed in a way that may have taken an item, which such a Poll loses
	// (its reply is lost; it is never re-attempted: docs/guarantees.md).
	lossBudget int
	// holds: the pops' holds (actorlock_request:{name}:<id>) the hooks
	// saw an item moved into, and what each command on it did (as its
	// client saw it); a quiet point forgets those it finds empty.
	holds map[string][]string
	// holdsSince: the model's restartSeq when the hooks first saw a call on
	// each hold. A restart without persistence since then may have wiped
	// the mark that ends it (scripts.Taken): a pop sent before it and
	// reaching Redis after it leaves its item there (docs/guarantees.md,
	// "Not guaranteed for queues and semaphores").
	holdsSince map[string]int
	// recent: payloads offered to the delayed queue lately, for Remove.
	recent []string
}

// semLedger: a plain semaphore's permits. expected is what Redis holds
// once every call that returned acted as it said: the permits set, plus
// those added and released, minus those acquired and drained. unknown are
// the changes of calls that may have acted, each once or not at all.
type semLedger struct {
	expected int64
	unknown  []int64
	// drainMaybe: a Drain may have taken an unknown number: the next
	// quiet point starts the count again from what Redis holds.
	drainMaybe bool
	held       int64 // by the workers
	set, added int64
	drained    int64
}

// xsemLedger: a permit-expirable semaphore. total is available plus
// recorded permits (set + added); permits are the ids the workers hold.
type xsemLedger struct {
	total   int64
	unknown []int64
	permits map[string]*permit
	// stories: what reached each permit id's acquisitions and releases,
	// as their clients saw it (the last ids, for a violation's detail).
	stories map[string][]string
}

type permit struct {
	asked time.Time
	lease time.Duration // 0: none
	// releaseMaybe: a Release of it failed in a way that may have acted.
	releaseMaybe bool
	worker       int
	// restarts: the model's restartSeq when it was acquired (a restart
	// without persistence forgets it).
	restarts int
}

// latchLedger: the current cycle of a count-down latch: its warden sets
// the count (TrySetCount) and workers count down at most n-1 times
// (tickets), so that it never reaches zero by their CountDowns alone; at
// the cycle's end the warden counts it down to zero.
type latchLedger struct {
	cycle  int
	active bool
	n      int64
	// tickets: CountDowns started; ok: returned nil; maybe: failed in a
	// way that may have counted.
	tickets, ok, maybe int64
	// restarts: the model's restartSeq when the cycle began (a restart
	// without persistence wipes the count).
	restarts int
}

// addPrims registers the primitive names of run c (after the lock names).
func (m *model) addPrims(c *config, prefix string) {
	m.prims = map[string]*primState{}
	for k := 0; k < nPrimKinds; k++ {
		for i := 0; i < c.primNames[k]; i++ {
			name := fmt.Sprintf("%s:%s:%d", prefix, primKindNames[k], i)
			p := &primState{name: name, kind: k, hist: newNameState(name, -1, false)}
			p.hist.prim = true
			p.lastCall.Store(time.Now().UnixNano())
			switch k {
			case pQueue:
				p.q = &queueLedger{items: map[string]*queueItem{}, ended: map[string]string{}, holds: map[string][]string{}, holdsSince: map[string]int{}}
			case pSemaphore:
				p.s = &semLedger{}
			case pExpirable:
				p.x = &xsemLedger{permits: map[string]*permit{}, stories: map[string][]string{}}
			case pLatch:
				p.l = &latchLedger{}
			}
			m.prims[name] = p
			m.primList = append(m.primList, p)
		}
	}
}

// primWorker drives the primitives through one runtime slot.
type primWorker struct {
	id  int
	w   *world
	s   *slot
	rng *rand.Rand
	// Permits it holds: a plain semaphore's (any caller may release them)
	// and a permit-expirable one's ids.
	sems  []semChunk
	xsems []xsemChunk
}

type semChunk struct {
	p *primState
	n int64
}

type xsemChunk struct {
	p   *primState
	ids []string
}

func newPrimWorker(w *world, s *slot, id int) *primWorker {
	return &primWorker{id: id, w: w, s: s, rng: rand.New(rand.NewPCG(w.cfg.seed, uint64(id)+5000))}
}

// primOpOf is the SIM_OPS kind of each primitive kind's calls (the delayed
// queue's are drawn apart, opDelayed).
var primOpOf = [nPrimKinds]int{pQueue: opQueue, pSemaphore: opSemaphore, pExpirable: opExpirable, pLatch: opLatch}

func (pw *primWorker) run() {
	c := pw.w.cfg
	for pw.w.ctx.Err() == nil {
		if len(pw.sems)+len(pw.xsems) > 0 && (len(pw.sems)+len(pw.xsems) >= 2 || pw.rng.IntN(100) < 40) {
			pw.releaseOne(false)
		} else if p := pw.pick(); p != nil {
			pw.w.primOps.Add(1)
			pw.do(p)
			p.leave()
		} else {
			time.Sleep(20 * time.Millisecond)
		}
		if !pw.w.pause(time.Duration(pw.rng.IntN(6)) * time.Millisecond) {
			break
		}
	}
	_ = c
}

// pick enters a primitive name whose gate is open and whose kind is on.
func (pw *primWorker) pick() *primState {
	list := pw.w.model.primList
	for range 8 {
		p := list[pw.rng.IntN(len(list))]
		on := pw.w.cfg.opOn(primOpOf[p.kind]) || p.kind == pQueue && pw.w.cfg.opOn(opDelayed)
		if on && p.enter() {
			return p
		}
	}
	return nil
}

func (pw *primWorker) do(p *primState) {
	switch p.kind {
	case pQueue:
		pw.queueOp(p)
	case pSemaphore:
		pw.semOp(p)
	case pExpirable:
		pw.xsemOp(p)
	case pLatch:
		pw.latchOp(p)
	}
}

// pause waits d, or until the run ends (false then).
func (w *world) pause(d time.Duration) bool {
	if d <= 0 {
		return w.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.ctx.Done():
		return false
	}
}

func (pw *primWorker) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(pw.rng.Int64N(int64(hi-lo)+1))
}

func (pw *primWorker) runtime() (*actorlock.Runtime, int) {
	return pw.s.current()
}

// call runs one tracked call on p that must be answered within bound
// (its ctx's timeout, say), the tolerance, and two call timeouts: a call's
// Redis call is bounded by one (the hooks' faults hold it that long
// whatever its ctx), and what follows it by another (a pop ends its hold,
// a cancelled call gives back what it won).
func (pw *primWorker) call(p *primState, what string, bound time.Duration, fn func()) {
	m := pw.w.model
	id := m.begin(pw.id, what+" "+p.name, p.name, bound+2*pw.w.cfg.callTimeout+pw.w.cfg.tol)
	fn()
	m.end(id)
}

// record adds a line to p's history (m.mu held).
func (p *primState) record(worker int, format string, args ...any) {
	p.hist.record(worker, format, args...)
}

// mayHaveActed reports whether a call that failed with err may have acted
// in Redis: anything but a refusal before anything was sent (a dial that
// failed, a runtime already closed, a bad argument), unless an earlier
// attempt of the call may have run (the runtime says so in its error).
func mayHaveActed(err error) bool {
	var op *net.OpError
	refused := errors.As(err, &op) && op.Op == "dial" || errors.Is(err, actorlock.ErrClosed) || errors.Is(err, actorlock.ErrInvalidArgument)
	return err != nil && (!refused || strings.Contains(err.Error(), "an earlier try may have run"))
}

// unknowable: a call whose outcome the library could not learn (Redis did
// not answer its settling for as long as its guard lives) says so; any
// other failure of a settled call means it did nothing.
func unknowable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "could not be learnt")
}

// Queues.

func (pw *primWorker) queueOp(p *primState) {
	c := pw.w.cfg
	var ops []func(*primState)
	if c.opOn(opQueue) {
		ops = append(ops, pw.offer, pw.offer, pw.offer, pw.take, pw.take, pw.take, pw.poll, pw.poll)
	}
	if c.opOn(opDelayed) {
		ops = append(ops, pw.offerDelayed, pw.offerDelayed, pw.pollDelayed, pw.removeDelayed)
	}
	ops[pw.rng.IntN(len(ops))](p)
}

// payload is a new item's value: unique within the run.
func (pw *primWorker) payload(p *primState) string {
	return fmt.Sprintf("%s#w%d#%d", p.name[strings.LastIndexByte(p.name, ':')+1:], pw.id, p.seq.Add(1))
}

// offered enters an offer of v in the ledger before its call.
func (m *model) offering(p *primState, v string, delayed bool) {
	m.mu.Lock()
	p.q.items[v] = &queueItem{offer: offerPending, delayed: delayed}
	m.mu.Unlock()
}

// offerReturned enters what an Offer of v returned.
func (m *model) offerReturned(p *primState, worker int, v, what string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it := p.q.items[v]
	switch {
	case err == nil:
		it.offer = offerDone
	case mayHaveActed(err):
		it.offer = offerMaybe
	default:
		delete(p.q.items, v)
		p.q.ended[v] = "never offered (" + errKind(err) + ")"
	}
	if err == nil && it.delayed {
		if p.q.recent = append(p.q.recent, v); len(p.q.recent) > 16 {
			p.q.recent = p.q.recent[1:]
		}
	}
	p.record(worker, "%s %s -> %s", what, v, errKind(err))
}

func (pw *primWorker) offer(p *primState) {
	rt, _ := pw.runtime()
	v := pw.payload(p)
	m := pw.w.model
	m.offering(p, v, false)
	timeout := pw.ctxTimeout()
	var err error
	pw.call(p, "offer", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err = rt.BlockingQueue(p.name).Offer(ctx, []byte(v))
	})
	m.offerReturned(p, pw.id, v, "offer", err)
}

// ctxTimeout is a call's ctx: mostly long enough, sometimes ending first.
func (pw *primWorker) ctxTimeout() time.Duration {
	if pw.rng.IntN(8) == 0 {
		return pw.dur(time.Millisecond, 30*time.Millisecond)
	}
	return pw.dur(200*time.Millisecond, 4*time.Second)
}

func (pw *primWorker) offerDelayed(p *primState) {
	rt, gen := pw.runtime()
	q := pw.w.delayedQueue(rt, pw.s.idx, gen, p.name)
	v := pw.payload(p)
	m := pw.w.model
	m.offering(p, v, true)
	delay := pw.dur(0, 1500*time.Millisecond)
	timeout := pw.ctxTimeout()
	var err error
	pw.call(p, "offer delayed", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err = q.Offer(ctx, []byte(v), delay)
	})
	m.offerReturned(p, pw.id, v, fmt.Sprintf("offer delayed %v", delay), err)
}

// delivered enters an item a Take or Poll returned: each item at most once.
func (m *model) delivered(p *primState, worker int, v []byte, what string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := string(v)
	p.record(worker, "%s -> %s", what, s)
	it := p.q.items[s]
	switch {
	case it == nil && p.q.ended[s] != "":
		m.failPrim(invDelivered, p, "%s returned %s, which had %s", what, s, p.q.ended[s])
	case it == nil:
		m.failPrim(invDelivered, p, "%s returned %q, which was never offered", what, s)
	case it.delivered > 0 || it.removed == removeDone:
		m.failPrim(invDelivered, p, "%s returned %s, delivered %d times before (removed: %v)", what, s, it.delivered, it.removed == removeDone)
	default:
		it.delivered++
	}
}

func (pw *primWorker) take(p *primState) {
	rt, _ := pw.runtime()
	timeout := pw.dur(20*time.Millisecond, 1500*time.Millisecond)
	var v []byte
	var err error
	pw.call(p, "take", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		v, err = rt.BlockingQueue(p.name).Take(ctx)
	})
	pw.popped(p, "take", v, err == nil, err)
}

// popped enters what a pop returned: an item goes to its caller, or back
// to the queue (a Take or a blocking-queue Poll that failed took nothing).
func (pw *primWorker) popped(p *primState, what string, v []byte, ok bool, err error) {
	m := pw.w.model
	if ok && err == nil {
		m.delivered(p, pw.id, v, what)
		return
	}
	m.mu.Lock()
	p.record(pw.id, "%s -> %s", what, map[bool]string{true: errKind(err), false: "empty"}[err != nil])
	m.mu.Unlock()
}

func (pw *primWorker) poll(p *primState) {
	rt, _ := pw.runtime()
	timeout := pw.ctxTimeout()
	var v []byte
	var ok bool
	var err error
	pw.call(p, "poll", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		v, ok, err = rt.BlockingQueue(p.name).Poll(ctx)
	})
	pw.popped(p, "poll", v, ok, err)
}

func (pw *primWorker) pollDelayed(p *primState) {
	rt, gen := pw.runtime()
	q := pw.w.delayedQueue(rt, pw.s.idx, gen, p.name)
	timeout := pw.ctxTimeout()
	var v []byte
	var ok bool
	var err error
	pw.call(p, "poll delayed", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		v, ok, err = q.Poll(ctx)
	})
	if ok && err == nil {
		pw.w.model.delivered(p, pw.id, v, "poll delayed")
		return
	}
	m := pw.w.model
	m.mu.Lock()
	defer m.mu.Unlock()
	if mayHaveActed(err) {
		p.q.lossBudget++
	}
	p.record(pw.id, "poll delayed -> %s", map[bool]string{true: errKind(err), false: "empty"}[err != nil])
}

func (pw *primWorker) removeDelayed(p *primState) {
	m := pw.w.model
	m.mu.Lock()
	if len(p.q.recent) == 0 {
		m.mu.Unlock()
		return
	}
	v := p.q.recent[pw.rng.IntN(len(p.q.recent))]
	it := p.q.items[v]
	m.mu.Unlock()
	if it == nil {
		return
	}
	rt, gen := pw.runtime()
	q := pw.w.delayedQueue(rt, pw.s.idx, gen, p.name)
	timeout := pw.ctxTimeout()
	var ok bool
	var err error
	pw.call(p, "remove delayed", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		ok, err = q.Remove(ctx, []byte(v))
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	p.record(pw.id, "remove delayed %s -> %v %s", v, ok, errKind(err))
	switch {
	case err == nil && ok && (it.delivered > 0 || it.removed == removeDone):
		m.failPrim(invDelivered, p, "Remove of %s returned true after it was delivered %d times (removed: %v)", v, it.delivered, it.removed == removeDone)
	case err == nil && ok:
		it.removed = removeDone
	case mayHaveActed(err) && it.removed == removeNone:
		it.removed = removeMaybe
	}
}

// delayedQueue is slot's handle on delayed queue name (generation gen),
// opened once: its runtime moves the queue's due items while it is open.
func (w *world) delayedQueue(rt *actorlock.Runtime, slot, gen int, name string) *primitive.DelayedQueue {
	w.dqMu.Lock()
	defer w.dqMu.Unlock()
	k := fmt.Sprintf("%d/%d/%s", slot, gen, name)
	q := w.dqs[k]
	if q == nil {
		q = rt.DelayedQueue(name)
		w.dqs[k] = q
	}
	return q
}

// Plain semaphores.

func (pw *primWorker) semOp(p *primState) {
	switch v := pw.rng.IntN(20); {
	case v < 12:
		pw.semAcquire(p)
	case v < 16:
		pw.semAdd(p, []int64{1, 1, 2, -1}[pw.rng.IntN(4)])
	case v < 18:
		pw.semDrain(p)
	default:
		// A release of permits another worker acquired: permits have no
		// owner.
		pw.releaseOne(true)
	}
}

func (pw *primWorker) semAcquire(p *primState) {
	rt, _ := pw.runtime()
	n := int64(1 + pw.rng.IntN(2))
	try := pw.rng.IntN(3) == 0
	timeout := pw.dur(10*time.Millisecond, 1500*time.Millisecond)
	var ok bool
	var err error
	if pw.rng.IntN(8) == 0 {
		// An acquisition whose outcome stays unknown past its call: its
		// first attempt takes the permits and loses its reply, and every
		// attempt after it, and its settling, is refused for a while
		// (shorter than the settling lasts). The runtime must learn what
		// it did and give back what nobody got.
		s := pw.s
		s.mu.RLock()
		f := s.f
		s.mu.RUnlock()
		window := pw.w.cfg.callTimeout + time.Duration(300+pw.rng.IntN(700))*time.Millisecond
		out := f.aimAt(&aim{kind: fReleaseOutage, window: window, left: 1000,
			match: func(sc scriptCall) bool { return sc.script == "semaphore_acquire" && arg(sc.keys, 0) == p.name }})
		// The attempt goes on after a cancelled call returns: the outage
		// lasts its window from its first hit.
		defer time.AfterFunc(2*window, func() { f.unaim(out) })
	}
	// A cancelled Acquire gives back what won the race, within a call
	// timeout, before it returns.
	pw.call(p, "semaphore acquire", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		sem := rt.Semaphore(p.name)
		if try {
			ok, err = sem.TryAcquire(ctx, n)
		} else {
			err = sem.Acquire(ctx, n)
			ok = err == nil
		}
	})
	m := pw.w.model
	m.mu.Lock()
	defer m.mu.Unlock()
	p.record(pw.id, "acquire %d (try %v) -> %v %s", n, try, ok, errKind(err))
	switch {
	case ok && err == nil:
		p.s.expected -= n
		p.s.held += n
		pw.sems = append(pw.sems, semChunk{p, n})
	case unknowable(err):
		p.s.unknown = append(p.s.unknown, -n)
	}
}

func (pw *primWorker) semAdd(p *primState, k int64) {
	rt, _ := pw.runtime()
	timeout := pw.ctxTimeout()
	var err error
	pw.call(p, "semaphore add permits", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if p.kind == pExpirable {
			err = rt.PermitExpirableSemaphore(p.name).AddPermits(ctx, k)
		} else {
			err = rt.Semaphore(p.name).AddPermits(ctx, k)
		}
	})
	m := pw.w.model
	m.mu.Lock()
	defer m.mu.Unlock()
	p.record(pw.id, "add permits %d -> %s", k, errKind(err))
	switch {
	case err == nil && p.kind == pExpirable:
		p.x.total += k
	case err == nil:
		p.s.expected += k
		p.s.added += k
	case mayHaveActed(err) && p.kind == pExpirable:
		p.x.unknown = append(p.x.unknown, k)
	case mayHaveActed(err):
		p.s.unknown = append(p.s.unknown, k)
	}
}

// semDrain takes every available permit, and adds as many back.
func (pw *primWorker) semDrain(p *primState) {
	rt, _ := pw.runtime()
	timeout := pw.ctxTimeout()
	var d int64
	var err error
	pw.call(p, "semaphore drain", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		d, err = rt.Semaphore(p.name).Drain(ctx)
	})
	m := pw.w.model
	m.mu.Lock()
	p.record(pw.id, "drain -> %d %s", d, errKind(err))
	switch {
	case err == nil:
		p.s.expected -= d
		p.s.drained += d
	case mayHaveActed(err):
		p.s.drainMaybe = true
	}
	m.mu.Unlock()
	if err == nil && d > 0 {
		pw.semAdd(p, d)
	}
}

// releaseOne releases permits the worker holds (any: when another worker's
// call asked, one of the plain semaphore p's).
func (pw *primWorker) releaseOne(onlySem bool) {
	n := len(pw.sems) + len(pw.xsems)
	if onlySem {
		n = len(pw.sems)
	}
	if n == 0 {
		return
	}
	k := pw.rng.IntN(n)
	if k < len(pw.sems) {
		ch := pw.sems[k]
		if !ch.p.enter() {
			return
		}
		done := pw.semRelease(ch)
		ch.p.leave()
		if done {
			pw.sems = append(pw.sems[:k], pw.sems[k+1:]...)
		}
		return
	}
	k -= len(pw.sems)
	ch := pw.xsems[k]
	if !ch.p.enter() {
		return
	}
	done := pw.xsemRelease(ch)
	ch.p.leave()
	if done {
		pw.xsems = append(pw.xsems[:k], pw.xsems[k+1:]...)
	}
}

// semRelease releases a chunk of permits; true when the worker is done
// with it (released, or may have been: it is never released twice).
func (pw *primWorker) semRelease(ch semChunk) bool {
	p := ch.p
	rt, _ := pw.runtime()
	timeout := pw.ctxTimeout()
	var err error
	pw.w.primOps.Add(1)
	pw.call(p, "semaphore release", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err = rt.Semaphore(p.name).Release(ctx, ch.n)
	})
	m := pw.w.model
	m.mu.Lock()
	defer m.mu.Unlock()
	p.record(pw.id, "release %d -> %s", ch.n, errKind(err))
	switch {
	case err == nil:
		p.s.expected += ch.n
		p.s.held -= ch.n
		return true
	case mayHaveActed(err):
		p.s.unknown = append(p.s.unknown, ch.n)
		p.s.held -= ch.n
		return true
	}
	return false
}

// Permit-expirable semaphores.

func (pw *primWorker) xsemOp(p *primState) {
	if pw.rng.IntN(6) == 0 {
		pw.semAdd(p, []int64{1, 1, 2, -1}[pw.rng.IntN(4)])
		return
	}
	pw.xsemAcquire(p)
}

func (pw *primWorker) xsemAcquire(p *primState) {
	rt, _ := pw.runtime()
	n := int64(1 + pw.rng.IntN(2))
	try := pw.rng.IntN(3) == 0
	var lease time.Duration
	if pw.rng.IntN(4) != 0 {
		lease = pw.dur(300*time.Millisecond, 3*time.Second)
	}
	timeout := pw.dur(10*time.Millisecond, 1500*time.Millisecond)
	var ids []string
	var err error
	asked := time.Now()
	pw.call(p, "expirable acquire", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		sem := rt.PermitExpirableSemaphore(p.name)
		if try {
			ids, _, err = sem.TryAcquirePermits(ctx, n, lease)
		} else {
			ids, err = sem.AcquirePermits(ctx, n, lease)
		}
	})
	m := pw.w.model
	m.mu.Lock()
	defer m.mu.Unlock()
	p.record(pw.id, "acquire %d lease %v (try %v) -> ids %s %s", n, lease, try, shortIDs(ids), errKind(err))
	if err != nil || len(ids) == 0 {
		return
	}
	for _, id := range ids {
		p.x.permits[strings.ToLower(id)] = &permit{asked: asked, lease: lease, worker: pw.id, restarts: m.restartSeq}
	}
	pw.xsems = append(pw.xsems, xsemChunk{p, ids})
}

// xsemRelease releases a chunk of permit ids; true when the worker is done
// with them.
func (pw *primWorker) xsemRelease(ch xsemChunk) bool {
	p := ch.p
	rt, _ := pw.runtime()
	timeout := pw.ctxTimeout()
	var err error
	pw.w.primOps.Add(1)
	pw.call(p, "expirable release", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err = rt.PermitExpirableSemaphore(p.name).Release(ctx, ch.ids...)
	})
	returned := time.Now()
	m := pw.w.model
	m.mu.Lock()
	defer m.mu.Unlock()
	p.record(pw.id, "release ids %s -> %s", shortIDs(ch.ids), errKind(err))
	switch {
	case err == nil || errors.Is(err, actorlock.ErrPermitExpired):
		if errors.Is(err, actorlock.ErrPermitExpired) {
			// Only an id past its lease (or released already, by a
			// Release that may have acted) is not held.
			held := true
			for _, id := range ch.ids {
				pm := p.x.permits[strings.ToLower(id)]
				held = held && pm != nil && !pm.releaseMaybe && pm.restarts == m.restartSeq && (pm.lease == 0 || returned.Before(pm.asked.Add(pm.lease)))
			}
			if held {
				m.failPrim(invHeld, p,
					"Release of %d ids, each within its lease when the call returned and never released before, got %v", len(ch.ids), err)
			}
		}
		for _, id := range ch.ids {
			delete(p.x.permits, strings.ToLower(id))
		}
		return true
	case mayHaveActed(err):
		for _, id := range ch.ids {
			if pm := p.x.permits[strings.ToLower(id)]; pm != nil {
				pm.releaseMaybe = true
			}
		}
	}
	// Released or not: called again (a Release that acted reports the
	// ids not held, ErrPermitExpired, and releases nothing more).
	return false
}

// Count-down latches.

func (pw *primWorker) latchOp(p *primState) {
	m := pw.w.model
	m.mu.Lock()
	l := p.l
	countDown := l.active && l.tickets < l.n-1 && pw.rng.IntN(3) != 0
	if countDown {
		l.tickets++
	}
	active, cycle := l.active, l.cycle
	m.mu.Unlock()
	if !active {
		return
	}
	rt, _ := pw.runtime()
	if countDown {
		timeout := pw.ctxTimeout()
		var err error
		pw.call(p, "count down", timeout, func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			err = rt.CountDownLatch(p.name).CountDown(ctx)
		})
		m.mu.Lock()
		defer m.mu.Unlock()
		p.record(pw.id, "count down (cycle %d) -> %s", cycle, errKind(err))
		switch {
		case err == nil:
			l.ok++
		case mayHaveActed(err):
			l.maybe++
		}
		return
	}
	// An Await while the count is above zero (at most n-1 CountDowns
	// were started) returns only when its ctx ends.
	timeout := pw.dur(20*time.Millisecond, 600*time.Millisecond)
	var err error
	pw.call(p, "await", timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err = rt.CountDownLatch(p.name).Await(ctx)
	})
	count := int64(-1)
	if err == nil {
		// Released early, or the count did reach zero: Redis says which.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		count, _ = pw.w.admin.Get(ctx, p.name).Int64()
		cancel()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p.record(pw.id, "await (cycle %d, ctx %v) -> %s", cycle, timeout, errKind(err))
	switch {
	case err != nil || l.restarts != m.restartSeq || l.cycle != cycle:
	case count < l.n-l.tickets:
		m.failPrim(invLatch, p, "Await returned nil in cycle %d: the count is %d; set to %d, with %d CountDowns started so far", cycle, count, l.n, l.tickets)
	default:
		m.failPrim(invAwaitEarly, p,
			"Await (ctx %v) returned nil in cycle %d, where %d CountDowns of %d started, none of them the last (the count is %d)", timeout, cycle, l.tickets, l.n, count)
	}
}

// drain releases what the worker holds, calling again while the outcome
// is not final (no faults now).
func (pw *primWorker) drain() {
	for range 5 {
		if len(pw.sems)+len(pw.xsems) == 0 {
			return
		}
		for len(pw.sems) > 0 {
			ch := pw.sems[0]
			pw.sems = pw.sems[1:]
			if !pw.semRelease(ch) {
				pw.sems = append(pw.sems, ch)
				break
			}
		}
		for len(pw.xsems) > 0 {
			ch := pw.xsems[0]
			pw.xsems = pw.xsems[1:]
			if !pw.xsemRelease(ch) {
				pw.xsems = append(pw.xsems, ch)
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// failPrim records a violation of a primitive's check (m.mu held).
func (m *model) failPrim(invariant string, p *primState, format string, args ...any) {
	m.failKnown(0, invariant, p.hist, nil, format, args...)
}

// primsOf is the primitive names cmds touch (a key of theirs, in its
// {hash tag} or whole), but for the delayed queues' moves: a move changes
// where an item is in Redis, never how many there are.
func (w *world) primsOf(cmds []redis.Cmder) []*primState {
	prims := w.model.prims
	if len(prims) == 0 {
		return nil
	}
	var out []*primState
	for _, c := range cmds {
		if sc, ok := scriptCallOf(c); ok && sc.script == "queue_move" {
			continue
		}
		for _, a := range c.Args() {
			s, ok := a.(string)
			if !ok {
				continue
			}
			if p := prims[nameIn(s)]; p != nil {
				dup := false
				for _, q := range out {
					dup = dup || q == p
				}
				if !dup {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// primCalls marks the primitive names cmds touch as called until the
// returned func runs, and notes the pops' holds they move items into.
func (w *world) primCalls(cmds []redis.Cmder) func() {
	ps := w.primsOf(cmds)
	if len(ps) == 0 {
		return func() {}
	}
	now := time.Now().UnixNano()
	for _, p := range ps {
		p.calls.Add(1)
		p.lastCall.Store(now)
	}
	return func() {
		for _, p := range ps {
			p.lastCall.Store(time.Now().UnixNano())
			p.calls.Add(-1)
		}
		w.holdCalls(cmds, "")
		w.permitCalls(cmds, "")
	}
}

// permitCalls notes, for each permit id that cmds acquire or release (a
// permit-expirable semaphore's scripts), what the command did as its
// client saw it (how: as holdCalls).
func (w *world) permitCalls(cmds []redis.Cmder, how string) {
	for _, c := range cmds {
		sc, ok := scriptCallOf(c)
		if !ok || sc.script != "semaphore_expirable_acquire" && sc.script != "semaphore_expirable_release" {
			continue
		}
		p := w.model.prims[arg(sc.keys, 0)]
		if p == nil || p.x == nil {
			continue
		}
		// The raw ids: after the lease, channel and deadline (acquire),
		// after the channel and before the guard's three (release).
		ids := sc.argv[min(3, len(sc.argv)):]
		if sc.script == "semaphore_expirable_release" {
			ids = sc.argv[min(1, len(sc.argv)):max(len(sc.argv)-3, 1)]
		}
		what := fmt.Sprintf("%s %s", sc.script[len("semaphore_expirable_"):], resultOf(c))
		if how != "" {
			what = how + " " + what
		}
		w.model.mu.Lock()
		for _, raw := range ids {
			id := hex.EncodeToString([]byte(raw))
			if story := p.x.stories[id]; len(story) < 8 {
				p.x.stories[id] = append(story, fmt.Sprintf("%.3fs %s", time.Since(w.start).Seconds(), what))
			}
		}
		if len(p.x.stories) > 4096 {
			p.x.stories = map[string][]string{}
		}
		w.model.mu.Unlock()
	}
}

// resultOf is a command's outcome as its client saw it.
func resultOf(c redis.Cmder) string {
	if err := c.Err(); err != nil {
		return "-> " + err.Error()
	}
	if r, ok := c.(*redis.Cmd); ok {
		return fmt.Sprintf("-> %v", r.Val())
	}
	return ""
}

// holdCalls notes, for each pop's hold that cmds move an item into or end,
// what the command did as its client saw it (how: what it was, if not the
// runtime's own call).
func (w *world) holdCalls(cmds []redis.Cmder, how string) {
	for _, c := range cmds {
		args := c.Args()
		if len(args) < 3 {
			continue
		}
		var queue, hold string
		switch strings.ToLower(fmt.Sprint(args[0])) {
		case "lmove", "blmove":
			queue, hold = fmt.Sprint(args[1]), fmt.Sprint(args[2])
		default:
			if sc, ok := scriptCallOf(c); ok && sc.script == "queue_taken" {
				queue, hold = arg(sc.keys, 0), arg(sc.keys, 1)
			}
		}
		p := w.model.prims[queue]
		if p == nil || p.q == nil {
			continue
		}
		what := c.String()
		if len(what) > 160 {
			what = what[:160] + "…"
		}
		if how != "" {
			what = how + ": " + what
		}
		w.model.mu.Lock()
		if _, ok := p.q.holds[hold]; !ok {
			p.q.holdsSince[hold] = w.model.restartSeq
		}
		if log := p.q.holds[hold]; len(log) < 8 {
			p.q.holds[hold] = append(log, fmt.Sprintf("%.3fs %s", time.Since(w.start).Seconds(), what))
		}
		w.model.mu.Unlock()
	}
}

// primDups counts late duplicates of cmds on their way (sendLater) until
// the returned func runs.
func (w *world) primDups(cmds []redis.Cmder) func() {
	ps := w.primsOf(cmds)
	for _, p := range ps {
		p.dups.Add(1)
	}
	return func() {
		for _, p := range ps {
			p.lastCall.Store(time.Now().UnixNano())
			p.dups.Add(-1)
		}
	}
}

// primSync is the world's part of the primitives: the delayed queues'
// handles of each runtime.
type primSync struct {
	dqMu sync.Mutex
	dqs  map[string]*primitive.DelayedQueue
}

// shortIDs is permit ids as a history shows them (their first 8 digits).
func shortIDs(ids []string) string {
	var out []string
	for _, id := range ids {
		out = append(out, id[:min(len(id), 8)])
	}
	return "[" + strings.Join(out, " ") + "]"
}
