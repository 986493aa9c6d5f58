package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/actorlock/actorlock"
)

// Operation kinds of the workload (bit per kind in config.opMask).
const (
	opAcquire     = iota // Acquire, with or without WaitTime and LeaseTime
	opTry                // TryAcquire
	opReenter            // an acquisition with a Held's Context (or as a reader's writer: ErrUpgrade)
	opWithOwner          // acquisitions through WithOwner handles shared by workers
	opUnlock             // Unlock: once, twice, concurrently, with a ctx that ends first
	opExtend             // Extend
	opForce              // ForceUnlock through some runtime
	opDel                // DEL by another client
	opCancel             // Acquire whose ctx is cancelled at a random moment
	opMulti              // MultiLock
	opRed                // RedLock over the runtimes
	opTiny               // LeaseTime under 10 ms: ErrInvalidArgument
	opClose              // a runtime closed mid-run (config.closeEvery)
	opUnlockTwice        // Unlock again at once after one whose ctx ended first
	opMessage            // an owner actor acquiring by message (Runtime.PID)
	opScenario           // a scenario aimed at a past defect's shape (scenario_test.go)
	opOwnerPair          // two acquisitions with one WithOwner id in flight at once, on one runtime or two
	// The primitives' calls, made by workers of their own (prim_test.go).
	opQueue     // a blocking queue's Offer, Take, Poll
	opDelayed   // a delayed queue's Offer, Poll, Remove (on a blocking queue's list)
	opSemaphore // a semaphore's Acquire, TryAcquire, Release, AddPermits, Drain
	opExpirable // a permit-expirable semaphore's Acquire, TryAcquire, Release, AddPermits
	opLatch     // a count-down latch's CountDown and Await (its warden sets the count)
	nOps
)

var opNames = [nOps]string{"acquire", "try", "reenter", "with-owner", "unlock", "extend", "force-unlock", "del", "cancel", "multilock", "redlock", "tiny-lease", "close", "unlock-twice", "message", "scenario", "with-owner-pair",
	"queue", "delayed-queue", "semaphore", "expirable-semaphore", "latch"}

var opWeights = [nOps]int{opAcquire: 20, opTry: 16, opReenter: 10, opWithOwner: 6, opUnlock: 0, opExtend: 4, opForce: 1, opDel: 1, opCancel: 6, opMulti: 3, opRed: 2, opTiny: 1, opMessage: 4, opScenario: 1, opOwnerPair: 2}

const maxHolds = 3

type worker struct {
	id     int
	w      *world
	s      *slot
	rng    *rand.Rand
	holds  []*hold
	groups []*groupHold
	// scenarios: the worker runs aimed scenarios only (config.scenarioWorkers).
	scenarios bool
}

type groupHold struct {
	g       *actorlock.GroupHeld
	members []*hold
	what    string
}

func newWorker(w *world, s *slot, id int) *worker {
	return &worker{id: id, w: w, s: s, rng: rand.New(rand.NewPCG(w.cfg.seed, uint64(id)+1000))}
}

func (wk *worker) run() {
	c := wk.w.cfg
	if wk.scenarios {
		wk.runScenarios()
		return
	}
	total := 0
	for k, wt := range opWeights {
		if c.opOn(k) {
			total += wt
		}
	}
	for wk.w.ctx.Err() == nil {
		wk.w.ops.Add(1)
		if len(wk.holds)+len(wk.groups) >= maxHolds || total == 0 || wk.rng.IntN(100) < 38 && c.opOn(opUnlock) {
			if len(wk.holds)+len(wk.groups) > 0 {
				wk.unlockOne()
				continue
			}
		}
		if total == 0 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		r := wk.rng.IntN(total)
		op := 0
		for k, wt := range opWeights {
			if !c.opOn(k) {
				continue
			}
			if r < wt {
				op = k
				break
			}
			r -= wt
		}
		wk.do(op)
	}
}

// snapshot is the runtime a step uses (a Close mid-run may replace it).
func (wk *worker) snapshot() (*actorlock.Runtime, int) {
	return wk.s.current()
}

func (wk *worker) pickName(kinds ...int) *nameState {
	list := wk.w.model.list
	for {
		n := list[wk.rng.IntN(len(list))]
		if n.scenario {
			continue
		}
		if len(kinds) == 0 {
			return n
		}
		for _, k := range kinds {
			if n.kind == k {
				return n
			}
		}
	}
}

// handle is name n's lock of kind (write: the write side of a read-write
// lock) on rt, shared by every worker that asks (handles are cheap; the
// runtime, not the handle, keeps per-name state).
func handle(rt *actorlock.Runtime, n *nameState, write bool, opts ...actorlock.LockOption) *actorlock.Lock {
	switch n.kind {
	case kFair:
		return rt.FairLock(n.name, opts...)
	case kRW:
		rw := rt.ReadWriteLock(n.name, opts...)
		if write {
			return rw.WriteLocker()
		}
		return rw.ReadLocker()
	}
	return rt.Lock(n.name, opts...)
}

func (wk *worker) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(wk.rng.Int64N(int64(hi-lo)+1))
}

// acquireOpts draws an acquisition's options: its ctx timeout, WaitTime
// (or none), LeaseTime (or the watchdog).
func (wk *worker) acquireOpts(n *nameState, try bool) (ctxTimeout time.Duration, opts []actorlock.AcquireOption, bound time.Duration, leased bool) {
	c := wk.w.cfg
	// Mostly short: a worker blocked on a held name does nothing else.
	// Some outlast a reply delayed past a lease (the waiter is still
	// there when its late grant comes back).
	switch v := wk.rng.IntN(10); {
	case v < 7:
		ctxTimeout = wk.dur(20*time.Millisecond, 300*time.Millisecond)
	case v < 9:
		ctxTimeout = wk.dur(300*time.Millisecond, 2*time.Second)
	default:
		ctxTimeout = wk.dur(2*time.Second, 5*time.Second)
	}
	// When ctx ends as a grant comes back, Acquire gives the grant back
	// before it returns: up to a call timeout more (docs/guarantees.md).
	bound = ctxTimeout + c.callTimeout
	if !try && wk.rng.IntN(2) == 0 {
		wait := wk.dur(0, 250*time.Millisecond)
		if n.kind == kFair && wk.rng.IntN(30) == 0 {
			// Long enough for the starvation check (checkStarved).
			wait = wk.dur(10*time.Second, 11*time.Second)
			ctxTimeout = wait + time.Second
			bound = ctxTimeout + c.callTimeout
		}
		opts = append(opts, actorlock.WaitTime(wait))
		bound = min(bound, wait)
	}
	if wk.rng.IntN(3) == 0 {
		opts = append(opts, actorlock.LeaseTime(wk.dur(c.leaseMin, c.leaseMax)))
		leased = true
	}
	// Acquire answers at its wait time, or when ctx ends (but for that
	// give-back), whatever Redis does; tol covers a loaded machine.
	return ctxTimeout, opts, bound + c.tol, leased
}

func (wk *worker) do(op int) {
	switch op {
	case opAcquire, opTry, opCancel:
		wk.acquire(op, nil, false)
	case opWithOwner:
		wk.acquire(op, nil, true)
	case opReenter:
		if len(wk.holds) == 0 {
			wk.acquire(opAcquire, nil, false)
			return
		}
		wk.acquire(op, wk.holds[wk.rng.IntN(len(wk.holds))], false)
	case opExtend:
		wk.extend()
	case opForce:
		wk.force()
	case opDel:
		wk.del()
	case opMulti:
		wk.multi()
	case opRed:
		wk.red()
	case opTiny:
		wk.tiny()
	case opMessage:
		wk.byMessage()
	case opScenario:
		wk.scenario()
	case opOwnerPair:
		wk.ownerPair()
	}
}

// acquire runs one acquisition: fresh, through a WithOwner handle, or a
// re-entry of parent.
func (wk *worker) acquire(op int, parent *hold, withOwner bool) {
	m := wk.w.model
	rt, gen := wk.snapshot()
	n := wk.pickName()
	base := context.Background()
	write := n.kind == kRW && wk.rng.IntN(3) == 0
	var lopts []actorlock.LockOption
	field := ""
	upgrade := false
	if parent != nil {
		if parent.gen != gen || parent.slot != wk.s.idx || parent.group {
			return
		}
		n = m.names[parent.name]
		base = parent.h.Context()
		write = false
		if n.kind == kRW {
			write = parent.write && wk.rng.IntN(2) == 0 || !parent.write && wk.rng.IntN(6) == 0
			// A read hold's context asking for the write side is an
			// upgrade unless its owner also writes (a downgrade's read).
			// After a force-unlock or DEL the read hold may be gone
			// in Redis before its owner learns it: the write side is
			// then free to it (its Held is lost, not an upgrade).
			upgrade = write && !parent.write && !m.writes(n, parent.owner) && !m.brokenSince(n, parent.since)
		}
		field = parent.owner
	}
	if withOwner {
		owner := fmt.Sprintf("sim-s%d-g%d-o%d", wk.s.idx, gen, wk.rng.IntN(3))
		lopts = append(lopts, actorlock.WithOwner(owner))
		field = owner
	}
	if field != "" && write {
		field += ":write"
	}
	l := handle(rt, n, write, lopts...)
	try := op == opTry
	ctxTimeout, opts, bound, leased := wk.acquireOpts(n, try)
	if op == opCancel {
		ctxTimeout = wk.dur(0, 15*time.Millisecond)
		bound = ctxTimeout + wk.w.cfg.callTimeout + wk.w.cfg.tol
	}
	if parent != nil {
		// A re-entry's ctx ends when its parent hold does, which may be
		// before its wait time: a grant coming back then is given back
		// before Acquire returns, up to a call timeout more.
		bound += wk.w.cfg.callTimeout
	}
	if n.kind == kFair {
		// A fair waiter that gives up is answered once it has left the
		// Redis queue, or its attempt in flight came back: up to a call
		// timeout later (docs/guarantees.md).
		bound += wk.w.cfg.callTimeout
	}
	ctx, cancel := context.WithTimeout(base, ctxTimeout)
	defer cancel()
	started := time.Now()
	h, err := wk.tracked(n, field, opNames[op], bound, func() (*actorlock.Held, error) {
		if try {
			return l.TryAcquire(ctx, opts...)
		}
		return l.Acquire(ctx, opts...)
	})
	desc := fmt.Sprintf("%s%s ctx %v opts %d", opNames[op], map[bool]string{true: " write", false: ""}[write], ctxTimeout, len(opts))
	if parent != nil {
		desc += fmt.Sprintf(" (re-entry of %s token %d)", short(parent.owner), parent.h.Token())
	}
	if err != nil {
		m.mu.Lock()
		n.record(wk.id, "%s -> %s", desc, errKind(err))
		if n.kind == kFair && errors.Is(err, actorlock.ErrNotAcquired) && bound-wk.w.cfg.tol >= 10*time.Second {
			m.checkStarved(n, started, time.Now(), wk.id)
		}
		if field != "" {
			// A grant may still come back and be given back.
			m.taint(n, field, time.Now())
		}
		m.mu.Unlock()
		return
	}
	if upgrade {
		m.mu.Lock()
		m.fail("a reader cannot take the write side (ErrUpgrade)", n, []string{h.Owner()}, "%s granted the write lock to a reader's context", desc)
		m.mu.Unlock()
	}
	hd := m.addHold(n, wk.id, wk.s.idx, gen, h, write, false, started)
	if parent != nil && h.Owner() != parent.owner || withOwner && h.Owner()+map[bool]string{true: ":write", false: ""}[write] != field {
		m.mu.Lock()
		m.fail("a re-entry acts as its owner", n, []string{h.Owner(), field}, "%s granted to owner %s", desc, h.Owner())
		m.mu.Unlock()
	}
	if withOwner {
		// An id given by the caller may be shared with a Redisson thread,
		// so only a re-attempt tells the script the count it saw: a first
		// attempt reaching Redis after its own retry can count one hold
		// more, left to expire unrenewed (docs/guarantees.md, Exactly
		// once). Runtime-made ids have no such excuse.
		m.mu.Lock()
		m.taint(n, field, time.Now())
		m.mu.Unlock()
	}
	_ = leased
	wk.holds = append(wk.holds, hd)
}

// tracked runs acquire as a request of field (its owner, "" if not known
// yet) on n that must be answered within bound.
func (wk *worker) tracked(n *nameState, field, what string, bound time.Duration, acquire func() (*actorlock.Held, error)) (*actorlock.Held, error) {
	m := wk.w.model
	m.opStart(n, field)
	owner := strings.TrimSuffix(field, ":write")
	m.mu.Lock()
	n.reacquiring[owner]++
	m.mu.Unlock()
	id := m.begin(wk.id, what+" "+n.name, n.name, bound)
	h, err := acquire()
	m.end(id)
	m.mu.Lock()
	if n.reacquiring[owner]--; n.reacquiring[owner] == 0 {
		delete(n.reacquiring, owner)
	}
	if err != nil && field != "" {
		// Its last run, sent before now, is settled within its guard's
		// life (GuardTTL, three call timeouts, plus its lease) less a
		// call timeout.
		until := time.Now().Add(2*wk.w.cfg.callTimeout + wk.w.cfg.maxLease())
		if until.After(n.unsettled[owner]) {
			n.unsettled[owner] = until
		}
	}
	m.mu.Unlock()
	m.opEnd(n, field)
	return h, err
}

// unlockOne releases one of the worker's holds or groups, in one of the
// ways a caller may: once, twice, concurrently, with a ctx that ends first.
func (wk *worker) unlockOne() {
	k := wk.rng.IntN(len(wk.holds) + len(wk.groups))
	if k >= len(wk.holds) {
		wk.unlockGroup(k - len(wk.holds))
		return
	}
	hd := wk.holds[k]
	if wk.unlock(hd) {
		wk.holds = append(wk.holds[:k], wk.holds[k+1:]...)
	}
}

// unlock releases hd; true when the worker is done with it.
func (wk *worker) unlock(hd *hold) bool {
	m := wk.w.model
	n := m.names[hd.name]
	switch v := wk.rng.IntN(10); {
	case v < 2:
		// A ctx that ends first: Unlock returns its error and the
		// release completes; then (sometimes at once) call it again.
		err := wk.unlockCall(n, hd, wk.dur(0, 3*time.Millisecond), "unlock short-ctx")
		if isFinal(err) {
			return true
		}
		if wk.rng.IntN(2) == 0 || !wk.w.cfg.opOn(opUnlockTwice) {
			return false
		}
		return isFinal(wk.unlockCall(n, hd, 2*time.Second, "unlock again"))
	case v < 3:
		// Two at once: at most one nil.
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = wk.unlockCall(n, hd, 2*time.Second, "unlock concurrent") }()
		}
		wg.Wait()
		if errs[0] == nil && errs[1] == nil {
			m.mu.Lock()
			m.fail("an Unlock cannot release twice", n, []string{hd.field}, "two concurrent Unlocks of token %d both returned nil", hd.h.Token())
			m.mu.Unlock()
		}
		return isFinal(errs[0]) || isFinal(errs[1])
	default:
		err := wk.unlockCall(n, hd, 2*time.Second, "unlock")
		if err == nil && wk.rng.IntN(5) == 0 {
			if err2 := wk.unlockCall(n, hd, 2*time.Second, "unlock after success"); !errors.Is(err2, actorlock.ErrUnlocked) {
				m.mu.Lock()
				m.fail("a second Unlock returns ErrUnlocked", n, []string{hd.field}, "got %v", err2)
				m.mu.Unlock()
			}
		}
		return isFinal(err)
	}
}

// isFinal: the hold is over for the caller (no reason to call again).
func isFinal(err error) bool {
	return err == nil || errors.Is(err, actorlock.ErrUnlocked) || errors.Is(err, actorlock.ErrLost) || errors.Is(err, actorlock.ErrClosed)
}

// unlockCall is one Unlock of hd with a ctx of timeout, judged against the
// Held and, for the owner's last hold, against Redis.
func (wk *worker) unlockCall(n *nameState, hd *hold, timeout time.Duration, what string) error {
	m := wk.w.model
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	m.mu.Lock()
	wasReleased := !hd.released.IsZero()
	if hd.unlockCalled.IsZero() {
		hd.unlockCalled = time.Now()
	}
	if n.kind == kRW {
		n.rwReleased[hd.owner] = time.Now()
	}
	hd.unlocking++
	if n.ownerUnlocks[hd.owner]++; n.ownerUnlocks[hd.owner] > 1 {
		n.concurrentUnlock[hd.owner] = time.Now()
	}
	m.mu.Unlock()
	m.opStart(n, hd.field)
	id := m.begin(wk.id, what+" "+n.name, n.name, timeout+wk.w.cfg.tol)
	started := time.Now()
	err := hd.h.Unlock(ctx)
	m.end(id)
	now := time.Now()
	m.mu.Lock()
	hd.unlocking--
	if n.ownerUnlocks[hd.owner]--; n.ownerUnlocks[hd.owner] <= 0 {
		delete(n.ownerUnlocks, hd.owner)
	}
	n.record(wk.id, "%s %s token %d -> %s", what, short(hd.owner), hd.h.Token(), errKind(err))
	switch {
	case err == nil:
		// A WithOwner id may count a hold twice on the slow path
		// (docs/guarantees.md, Exactly once): then a hold of it is left.
		// An earlier Unlock that failed is carried through by the
		// runtime, before the DEL or not: a release retried after an
		// unknown outcome that finds the hold gone reports it released
		// (docs/guarantees.md, Exactly once), so no fault may have
		// touched this one.
		faulted := n.lastFault.After(started) || m.lastFault.After(started)
		if !hd.group && !wasReleased && hd.unlocking == 0 && !hd.failedUnlock && !faulted && !strings.HasPrefix(hd.owner, "sim-") {
			for _, d := range n.deletes {
				// Nothing of it was left to release: a re-entry since
				// took a fresh hold, which is not this one.
				if hd.since.Before(d.from) && started.After(d.to) {
					m.fail("an Unlock of a Held whose lock was deleted under it does not report success", n, []string{hd.field},
						"token %d acquired before a DEL that returned %.3fs before this Unlock", hd.h.Token(), started.Sub(d.to).Seconds())
					break
				}
			}
		}
		if hd.released.IsZero() {
			hd.released = now
		}
	case errors.Is(err, actorlock.ErrUnlocked):
		wasReleased = wasReleased || !hd.released.IsZero()
		if hd.released.IsZero() {
			hd.released = now
		}
		// ErrUnlocked without an Unlock that returned nil (or whose ctx
		// ended first, or one running beside it) is a wrong answer.
		if cause := hd.h.Err(); !errors.Is(cause, actorlock.ErrUnlocked) && !wasReleased && hd.unlocking == 0 && hd.ctxUnlock.IsZero() {
			m.fail("Unlock's result matches the Held", n, []string{hd.field}, "Unlock returned ErrUnlocked; Err is %v", cause)
		}
	case errors.Is(err, actorlock.ErrLost):
		if hd.toldLost.IsZero() {
			hd.toldLost = now
		}
		m.taint(n, hd.field, now)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		hd.ctxUnlock = now
		hd.failedUnlock = true
		n.unlockFailed[hd.owner] = true
	default:
		hd.failedUnlock = true
		n.unlockFailed[hd.owner] = true
	}
	m.mu.Unlock()
	m.opEnd(n, hd.field)
	if err == nil && !hd.group {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		m.checkReleased(ctx, n, hd, wk.id)
		cancel()
	}
	return err
}

func (wk *worker) unlockGroup(k int) {
	m := wk.w.model
	g := wk.groups[k]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m.unlocking(g.members)
	id := m.begin(wk.id, g.what+" unlock", g.members[0].name, 2*time.Second+wk.w.cfg.tol)
	err := g.g.Unlock(ctx)
	m.end(id)
	now := time.Now()
	m.mu.Lock()
	for _, h := range g.members {
		n := m.names[h.name]
		n.record(wk.id, "%s unlock (member %s token %d) -> %s", g.what, short(h.owner), h.h.Token(), errKind(err))
		if h.abandoned.IsZero() {
			h.abandoned = now
		}
	}
	m.mu.Unlock()
	if err != nil && !errors.Is(err, actorlock.ErrUnlocked) && !errors.Is(err, actorlock.ErrClosed) && wk.rng.IntN(2) == 0 {
		// Call again: a failed member must not be forgotten.
		err2 := g.g.Unlock(ctx)
		m.mu.Lock()
		m.names[g.members[0].name].record(wk.id, "%s unlock again -> %s", g.what, errKind(err2))
		m.mu.Unlock()
	}
	wk.groups = append(wk.groups[:k], wk.groups[k+1:]...)
}

func (wk *worker) extend() {
	if len(wk.holds) == 0 {
		return
	}
	m := wk.w.model
	hd := wk.holds[wk.rng.IntN(len(wk.holds))]
	n := m.names[hd.name]
	d := wk.dur(wk.w.cfg.leaseMin, wk.w.cfg.leaseMax)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m.opStart(n, hd.field)
	id := m.begin(wk.id, "extend "+n.name, n.name, 2*time.Second+wk.w.cfg.tol)
	asked := time.Now()
	err := hd.h.Extend(ctx, d)
	m.end(id)
	m.opEnd(n, hd.field)
	m.mu.Lock()
	defer m.mu.Unlock()
	n.record(wk.id, "extend %s token %d by %v -> %s", short(hd.owner), hd.h.Token(), d, errKind(err))
	switch {
	case err == nil:
		hd.lease = max(hd.lease, d)
		if to := asked.Add(d - drift(d)); to.After(hd.extendedTo) {
			hd.extendedTo = to
		}
	case errors.Is(err, actorlock.ErrLost):
		if hd.toldLost.IsZero() {
			hd.toldLost = time.Now()
		}
		m.taint(n, hd.field, time.Now())
	}
}

func (wk *worker) force() {
	m := wk.w.model
	rt, _ := wk.snapshot()
	n := wk.pickName()
	l := handle(rt, n, wk.rng.IntN(2) == 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	from := time.Now()
	// Recorded before the call, whose holds may end before it returns: it
	// runs within its ctx and the call timeout, or reaches Redis as a late
	// duplicate (fLateDup) later still.
	m.breakName(n, from, from.Add(2*time.Second+2*wk.w.cfg.callTimeout+lateDupMax))
	id := m.begin(wk.id, "force-unlock "+n.name, n.name, 2*time.Second+wk.w.cfg.tol)
	was, err := l.ForceUnlock(ctx)
	m.end(id)
	m.mu.Lock()
	n.record(wk.id, "force-unlock -> was locked %v, %s", was, errKind(err))
	m.mu.Unlock()
}

func (wk *worker) del() {
	m := wk.w.model
	n := wk.pickName()
	var parent *hold
	if len(wk.holds) > 0 && wk.rng.IntN(2) == 0 {
		// A lock of this worker's, deleted under it and re-entered at
		// once, before the runtime can know (issue 23, defect 2).
		parent = wk.holds[wk.rng.IntN(len(wk.holds))]
		if parent.group {
			parent = nil
		} else {
			n = m.names[parent.name]
		}
	}
	wk.deleteName(context.Background(), n, "DEL by another client")
	if parent != nil {
		wk.acquire(opReenter, parent, false)
	}
}

// groupMembers picks k distinct names of the lock and fair kinds.
func (wk *worker) groupMembers(k int) []*nameState {
	var out []*nameState
	for len(out) < k {
		n := wk.pickName(kLock, kFair)
		dup := false
		for _, o := range out {
			dup = dup || o == n
		}
		if !dup {
			out = append(out, n)
		}
	}
	return out
}

// roundOwner is, for half the rounds, an owner id of the round's own
// (WithOwner) for every member, so that what a failed round leaves is
// known exactly (checkRounds); "" for the others (the runtime's ids).
func (wk *worker) roundOwner(gen int) (string, []actorlock.LockOption) {
	if wk.rng.IntN(2) == 0 {
		return "", nil
	}
	owner := fmt.Sprintf("sim-round-s%d-g%d-w%d-%d", wk.s.idx, gen, wk.id, wk.w.ops.Load())
	return owner, []actorlock.LockOption{actorlock.WithOwner(owner)}
}

func (wk *worker) multi() {
	rt, gen := wk.snapshot()
	names := wk.groupMembers(2 + wk.rng.IntN(2))
	owner, lopts := wk.roundOwner(gen)
	var locks []*actorlock.Lock
	for _, n := range names {
		locks = append(locks, handle(rt, n, false, lopts...))
	}
	slots := make([]int, len(names))
	gens := make([]int, len(names))
	for i := range slots {
		slots[i], gens[i] = wk.s.idx, gen
	}
	wk.group("multilock", owner, names, slots, gens, func(ctx context.Context, try bool, opts []actorlock.AcquireOption) (*actorlock.GroupHeld, error) {
		ml := actorlock.MultiLock(locks...)
		if try {
			return ml.TryAcquire(ctx, opts...)
		}
		return ml.Acquire(ctx, opts...)
	})
}

// red is a RedLock over every runtime slot, each member a name of its own
// (the slots' clients name distinct servers).
func (wk *worker) red() {
	if len(wk.w.slots) < 2 {
		return
	}
	names := wk.groupMembers(len(wk.w.slots))
	_, gen := wk.snapshot()
	owner, lopts := wk.roundOwner(gen)
	var locks []*actorlock.Lock
	slots := make([]int, len(names))
	gens := make([]int, len(names))
	for i, s := range wk.w.slots {
		s.mu.RLock()
		locks = append(locks, handle(s.rt, names[i], false, lopts...))
		slots[i], gens[i] = s.idx, s.gen
		s.mu.RUnlock()
	}
	wk.group("redlock", owner, names, slots, gens, func(ctx context.Context, try bool, opts []actorlock.AcquireOption) (*actorlock.GroupHeld, error) {
		rl := actorlock.RedLock(locks...)
		if try {
			return rl.TryAcquire(ctx, opts...)
		}
		return rl.Acquire(ctx, opts...)
	})
}

// group runs one MultiLock or RedLock acquisition (owner: its members'
// WithOwner id, "" for the runtimes' own).
func (wk *worker) group(what, owner string, names []*nameState, slots, gens []int, acquire func(context.Context, bool, []actorlock.AcquireOption) (*actorlock.GroupHeld, error)) {
	m := wk.w.model
	try := wk.rng.IntN(2) == 0
	var opts []actorlock.AcquireOption
	ctxTimeout := wk.dur(100*time.Millisecond, 2*time.Second)
	bound := ctxTimeout
	if !try {
		wait := wk.dur(0, 500*time.Millisecond)
		opts = append(opts, actorlock.WaitTime(wait))
		bound = min(bound, wait)
	}
	if wk.rng.IntN(3) == 0 {
		opts = append(opts, actorlock.LeaseTime(wk.dur(wk.w.cfg.leaseMin, wk.w.cfg.leaseMax)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), ctxTimeout)
	defer cancel()
	// A group waits for each member in turn, each bounded by what is
	// left, and releases what it took when one fails. A member whose ctx
	// ended is answered as a single acquisition is (acquire: its grant
	// given back first, up to a call timeout; a fair one's leave, up to
	// another), and the failed round's release of the members it took
	// waits for them (unlockAll, up to a call timeout more).
	callT := wk.w.cfg.callTimeout
	bound += 2 * callT
	for _, n := range names {
		if n.kind == kFair {
			bound += callT
			break
		}
	}
	asked := time.Now()
	id := m.begin(wk.id, what+" "+names[0].name, names[0].name, bound+wk.w.cfg.tol)
	g, err := acquire(ctx, try, opts)
	m.end(id)
	m.mu.Lock()
	for _, n := range names {
		n.record(wk.id, "%s%s try=%v over %d names -> %s", what, map[bool]string{true: " " + owner}[owner != ""], try, len(names), errKind(err))
	}
	if err != nil && owner != "" {
		m.roundFailed(&failedRound{what: what, owner: owner, names: names, slots: slots, at: time.Now()})
	}
	m.mu.Unlock()
	if err != nil {
		return
	}
	gh := &groupHold{g: g, what: what}
	byName := map[string]int{}
	for i, n := range names {
		byName[n.name] = i
	}
	for _, h := range g.Members() {
		i := byName[h.Name()]
		gh.members = append(gh.members, m.addHold(names[i], wk.id, slots[i], gens[i], h, false, true, asked))
	}
	wk.groups = append(wk.groups, gh)
}

// tiny: a lease too small to mean anything is refused at the call.
func (wk *worker) tiny() {
	m := wk.w.model
	rt, gen := wk.snapshot()
	n := wk.pickName()
	l := handle(rt, n, false)
	lease := time.Duration(1 + wk.rng.Int64N(int64(10*time.Millisecond-1)))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	asked := time.Now()
	id := m.begin(wk.id, "tiny-lease "+n.name, n.name, 300*time.Millisecond+wk.w.cfg.tol)
	h, err := l.Acquire(ctx, actorlock.LeaseTime(lease))
	m.end(id)
	m.mu.Lock()
	n.record(wk.id, "acquire LeaseTime(%v) -> %s", lease, errKind(err))
	if !errors.Is(err, actorlock.ErrInvalidArgument) {
		m.fail("a lease under 10ms is refused with ErrInvalidArgument", n, nil, "LeaseTime(%v) got %v", lease, errKind(err))
	}
	m.mu.Unlock()
	if h != nil {
		wk.holds = append(wk.holds, m.addHold(n, wk.id, wk.s.idx, gen, h, false, false, asked))
	}
}

// drain releases everything the worker holds, as a careful caller would:
// calling again while the outcome is not final.
func (wk *worker) drain() {
	for _, g := range wk.groups {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		wk.w.model.unlocking(g.members)
		_ = g.g.Unlock(ctx)
		cancel()
		m := wk.w.model
		m.mu.Lock()
		for _, h := range g.members {
			if h.abandoned.IsZero() {
				h.abandoned = time.Now()
			}
		}
		m.mu.Unlock()
	}
	wk.groups = nil
	for _, hd := range wk.holds {
		n := wk.w.model.names[hd.name]
		for try := 0; try < 5; try++ {
			if isFinal(wk.unlockCall(n, hd, 3*time.Second, "drain unlock")) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wk.holds = nil
}

// unlocking marks holds whose Unlock (their group's) is about to be called.
func (m *model) unlocking(holds []*hold) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for _, h := range holds {
		if h.unlockCalled.IsZero() {
			h.unlockCalled = now
		}
	}
}

// ownerPair: two acquisitions with one WithOwner id in flight at once, on
// the worker's runtime and on one drawn from all (maybe the same): issue
// 31's overlapping WithOwner attempts. The ids are shared by every worker
// and runtime, as a Redisson thread's id may be; but not a read's:
// docs/guarantees.md rules out one owner id's reads through two processes
// at once (a read release deletes the owner's newest read-hold key,
// whichever process holds that read), so read pairs keep to the worker's
// runtime, with ids of its own.
func (wk *worker) ownerPair() {
	m := wk.w.model
	n := wk.pickName()
	owner := fmt.Sprintf("sim-pair-o%d", wk.rng.IntN(4))
	write := n.kind == kRW && wk.rng.IntN(2) == 0
	field := owner
	if write {
		field += ":write"
	}
	slots := []*slot{wk.s, wk.w.slots[wk.rng.IntN(len(wk.w.slots))]}
	if n.kind == kRW && !write {
		_, gen := wk.s.current()
		owner = fmt.Sprintf("sim-pair-s%d-g%d-o%d", wk.s.idx, gen, wk.rng.IntN(4))
		field, slots[1] = owner, wk.s
	}
	if slots[0] != slots[1] {
		m.mu.Lock()
		n.shared[owner] = time.Now()
		m.mu.Unlock()
	}
	type got struct {
		h     *actorlock.Held
		err   error
		slot  int
		gen   int
		asked time.Time
	}
	out := make([]got, 2)
	var wg sync.WaitGroup
	for i, s := range slots {
		rt, gen := s.current()
		ctxTimeout, opts, bound, _ := wk.acquireOpts(n, false)
		if n.kind == kFair {
			bound += wk.w.cfg.callTimeout
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), ctxTimeout)
			defer cancel()
			asked := time.Now()
			h, err := wk.tracked(n, field, "with-owner pair", bound, func() (*actorlock.Held, error) {
				return handle(rt, n, write, actorlock.WithOwner(owner)).Acquire(ctx, opts...)
			})
			out[i] = got{h, err, s.idx, gen, asked}
		}()
	}
	wg.Wait()
	wk.w.ops.Add(1)
	for _, g := range out {
		m.mu.Lock()
		n.record(wk.id, "with-owner pair %s%s on runtime %d -> %s", short(owner), map[bool]string{true: " write"}[write], g.slot, errKind(g.err))
		// A grant may come back later and be given back; an id given by
		// the caller may count one hold more on the slow path (acquire).
		m.taint(n, field, time.Now())
		m.mu.Unlock()
		if g.err == nil {
			wk.holds = append(wk.holds, m.addHold(n, wk.id, g.slot, g.gen, g.h, write, false, g.asked))
		}
	}
}
