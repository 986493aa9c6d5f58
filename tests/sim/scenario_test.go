package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

// Scenarios are sequences the random workload reaches too rarely: each
// aims faults at the calls of one shape a past defect had (issue 23's
// defects 1 and 6), on a name kept for scenarios, and judges what follows
// with a check its sequence makes exact. The model follows their requests
// and holds like any other, so every general check applies too. A drawn
// fault or a global one (a killed connection, a pause, a restart, a Close)
// on the way means the scenario judges nothing: its check assumes none.

// scenarioNames is how many names of each kind scenarios share.
const scenarioNames = 4

// The scenarios, for their counts (world.scenarios).
const (
	scGiveBack = iota
	scFairLine
	scLateRelease   // issue 31, defect A (scenario31_test.go)
	scReleaseOutage // D
	scLateReentry   // C
	scDowngrade     // B
	scFairOrder     // E
	scLateGiveBack  // finding Z (scenarioz_test.go)
	// scenario_owners_test.go:
	scSharedOwner     // findings W and X
	scSettlingReentry // finding AA
	scDeadFairWaiter  // defect F
	scMixedReads      // red-team finding RT9-1 (scenario_reads_test.go)
	nScenarios
)

var scenarioKinds = [nScenarios]string{"give-back", "fair line", "late release", "release outage", "late re-entry", "downgrade", "fair order", "late give-back",
	"shared owner", "settling re-entry", "dead fair waiter", "mixed reads"}

// runScenarios is a scenario worker's loop: a scenario that found no free
// name of its kind waits a little before the next is drawn.
func (wk *worker) runScenarios() {
	for wk.w.ctx.Err() == nil {
		started := wk.w.scenariosStarted()
		wk.scenario()
		if wk.w.scenariosStarted() == started {
			wk.pause(50 * time.Millisecond)
		}
	}
}

func (w *world) scenariosStarted() int64 {
	var sum int64
	for k := range w.scenarios {
		sum += w.scenarios[k].Load()
	}
	return sum
}

// scenario runs one scenario, of a kind drawn among those SIM_SCENARIOS
// leaves.
func (wk *worker) scenario() {
	var kinds []int
	for k := 0; k < nScenarios; k++ {
		if wk.w.cfg.scenarioMask&(1<<k) != 0 {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return
	}
	switch kinds[wk.rng.IntN(len(kinds))] {
	case scGiveBack:
		wk.giveBackMeetsAHandOff()
	case scFairLine:
		wk.fairLineAfterADelete()
	case scLateRelease:
		wk.lateRelease()
	case scReleaseOutage:
		wk.releaseOutage()
	case scLateReentry:
		wk.lateReentry()
	case scDowngrade:
		wk.downgrade()
	case scFairOrder:
		wk.fairOrder()
	case scLateGiveBack:
		wk.lateGiveBack()
	case scSharedOwner:
		wk.sharedOwner()
	case scSettlingReentry:
		wk.settlingReentry()
	case scDeadFairWaiter:
		wk.deadFairWaiter()
	case scMixedReads:
		wk.mixedReads()
	}
}

// reserve takes a scenario name of kind that no other scenario is using,
// and spares it drawn faults, or returns nil; free gives it back.
func (m *model) reserve(kind int) *nameState {
	for _, n := range m.list {
		if n.scenario && n.kind == kind && n.busy.CompareAndSwap(false, true) {
			n.spared.Store(true)
			m.sparing.Add(1)
			return n
		}
	}
	return nil
}

func (m *model) free(n *nameState) {
	m.mu.Lock()
	n.shape = 0
	m.mu.Unlock()
	n.spared.Store(false)
	m.sparing.Add(-1)
	n.busy.Store(false)
}

// take reserves a name of kind for scenario sc (nil if all are busy) and
// counts the run; owner makes the ids of its owners, one per role.
func (wk *worker) take(kind, sc, gen int) (n *nameState, owner func(role string) string) {
	if n = wk.w.model.reserve(kind); n == nil {
		return nil, nil
	}
	m := wk.w.model
	m.mu.Lock()
	n.shape = scenarioShape[sc]
	m.mu.Unlock()
	wk.w.scenarios[sc].Add(1)
	return n, func(role string) string { return fmt.Sprintf("sim-sc-s%d-g%d-w%d-%s", wk.s.idx, gen, wk.id, role) }
}

// faultless reports that nothing since from can excuse a scenario's
// outcome: no fault on n (drawn ones spare it; one would be a harness
// error), no restart (it wipes every hold), and, if stalls, no CLIENT
// PAUSE WRITE (it holds every script up to a lease). Killed connections
// and slow pub/sub count for nothing here: a call they fail is retried,
// and a queue place outlives a failed refresh.
func (m *model) faultless(n *nameState, from time.Time, stalls bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n.lastFault.After(from) {
		return false
	}
	windows := m.restarts
	if stalls {
		windows = m.stalls
	}
	for _, iv := range windows {
		if iv.to.After(from) {
			return false
		}
	}
	return true
}

// acquired registers a hold a scenario got (nil for an error), asked for
// at asked (write: a write hold).
func (wk *worker) acquired(n *nameState, gen int, h *actorlock.Held, err error, what string, asked time.Time, write bool) *hold {
	return wk.acquiredOn(n, wk.s.idx, gen, h, err, what, asked, write)
}

// acquiredOn is acquired for a hold through the runtime in slot.
func (wk *worker) acquiredOn(n *nameState, slot, gen int, h *actorlock.Held, err error, what string, asked time.Time, write bool) *hold {
	m := wk.w.model
	if err != nil {
		m.mu.Lock()
		n.record(wk.id, "%s -> %s", what, errKind(err))
		m.mu.Unlock()
		return nil
	}
	hd := m.addHold(n, wk.id, slot, gen, h, write, false, asked)
	m.mu.Lock()
	// WithOwner ids: see acquire.
	m.taint(n, hd.field, time.Now())
	m.mu.Unlock()
	return hd
}

// outcome is what an acquisition of a scenario returned.
type outcome struct {
	hd  *hold // nil if err
	err error
}

// acquireAsync runs a tracked acquisition of l (a WithOwner handle) in the
// background.
func (wk *worker) acquireAsync(ctx context.Context, n *nameState, gen int, l *actorlock.Lock, what string, wait time.Duration, opts ...actorlock.AcquireOption) <-chan outcome {
	c := wk.w.cfg
	out := make(chan outcome, 1)
	bound := wait + c.callTimeout + c.tol
	wk.w.ops.Add(1)
	go func() {
		asked := time.Now()
		h, err := wk.tracked(n, l.Owner(), what, bound, func() (*actorlock.Held, error) {
			return l.Acquire(ctx, append(opts, actorlock.WaitTime(wait))...)
		})
		out <- outcome{wk.acquired(n, gen, h, err, what, asked, false), err}
	}()
	return out
}

// arg is argv[i], or "" past its end.
func arg(argv []string, i int) string {
	if i < len(argv) {
		return argv[i]
	}
	return ""
}

// release unlocks what a scenario still holds.
func (wk *worker) release(n *nameState, holds ...*hold) {
	for _, hd := range holds {
		if hd != nil {
			for i := 0; i < 3 && !wk.unlock(hd); i++ {
				wk.w.ops.Add(1)
			}
			wk.w.ops.Add(1)
		}
	}
}

// slotNow is the worker's runtime, its generation and its fault hook.
func (wk *worker) slotNow() (*actorlock.Runtime, int, *faults) {
	wk.s.mu.RLock()
	defer wk.s.mu.RUnlock()
	return wk.s.rt, wk.s.gen, wk.s.f
}

// giveBackMeetsAHandOff: issue 23's defect 1. Owner B's grant comes back
// after its lease (its reply late, or its command sent late: the lease the
// runtime counts from its send is over either way), so the runtime gives
// it back; that give-back's replies
// are lost (it ran; it is retried). Meanwhile owner A of the same runtime
// takes the lock and releases it: the release may hand the lock to B only
// once B's give-back is settled, or the give-back's retry, finding B's count
// of 1 again, deletes B's new hold. The check: B's hold, granted after A's
// Unlock began, is in Redis while its Held is live, until its lease from
// that moment is nearly over.
func (wk *worker) giveBackMeetsAHandOff() {
	m, c := wk.w.model, wk.w.cfg
	rt, gen, f := wk.slotNow()
	// Short, as the delay holds up the pipeline it is in (other names'
	// calls too), yet long enough to see B's hold deleted within it
	// (give-backs are retried after 100 ms).
	const lease = 600 * time.Millisecond
	// A late reply must come back, not time out: with a short read
	// timeout, the command is sent late instead.
	early := f.readTimeout < lease+time.Second || wk.rng.IntN(2) == 0
	n, owner := wk.take(kLock, scGiveBack, gen)
	if n == nil {
		return
	}
	defer m.free(n)
	a, b := owner("a"), owner("b")
	start := time.Now()
	late := f.aimAt(&aim{kind: fDelay, delay: lease + 200*time.Millisecond, early: early, left: 1, match: func(sc scriptCall) bool {
		return sc.script == "lock_acquire" && arg(sc.keys, 0) == n.name && arg(sc.argv, 1) == b
	}})
	defer f.unaim(late)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bc := wk.acquireAsync(ctx, n, gen, rt.Lock(n.name, actorlock.WithOwner(b)), "scenario give-back: B", 8*time.Second, actorlock.LeaseTime(lease))
	var hb *hold
	defer func() { wk.release(n, hb) }()
	select {
	case <-late.hits:
	case o := <-bc:
		hb = o.hd
		return
	}
	// The late grant is being given back: lose that give-back's replies.
	undo := f.aimAt(&aim{kind: fLostReply, left: 1000, match: func(sc scriptCall) bool {
		return sc.script == "lock_unlock" && arg(sc.keys, 0) == n.name && arg(sc.argv, 0) == b && arg(sc.argv, 3) != "" // a give-back
	}})
	defer f.unaim(undo)
	select {
	case <-undo.hits:
	case <-time.After(c.callTimeout):
		hb = (<-bc).hd
		return
	}
	wk.w.ops.Add(2) // A's TryAcquire and Unlock
	askedA := time.Now()
	tctx, tcancel := context.WithTimeout(ctx, time.Second)
	h, err := wk.tracked(n, a, "scenario give-back: A try", time.Second+c.callTimeout+c.tol, func() (*actorlock.Held, error) {
		return rt.Lock(n.name, actorlock.WithOwner(a)).TryAcquire(tctx)
	})
	tcancel()
	ha := wk.acquired(n, gen, h, err, "scenario give-back: A try", askedA, false)
	if ha == nil {
		f.unaim(undo)
		hb = (<-bc).hd
		return
	}
	unlockFrom := time.Now()
	err = wk.unlockCall(n, ha, 2*time.Second, "scenario give-back: A unlock")
	f.unaim(undo)
	hb = (<-bc).hd
	if err != nil || hb == nil {
		return
	}
	// Redis counts B's grant from its script, after A's release began (B
	// held nothing before: its give-back was out): B's hold is there
	// until lease after unlockFrom at the earliest, unless a fault broke
	// in. Its Held, live, says so too.
	if !m.faultless(n, start, false) {
		return
	}
	wk.w.judged[scGiveBack].Add(1)
	deadline := unlockFrom.Add(lease - 150*time.Millisecond)
	for {
		v, err := wk.w.admin.HGet(ctx, n.name, b).Result()
		if time.Now().After(deadline) || (err != nil && !errors.Is(err, redis.Nil)) {
			return
		}
		if v == "" && !doneNow(hb) && hb.h.Err() == nil && m.faultless(n, start, false) {
			m.mu.Lock()
			m.fail("a Held not Done is held in Redis by its owner", n, []string{a, b},
				"B's hold (token %d, lease %v), granted after A's Unlock began %.3fs ago, is missing from Redis while its Done is open (A's release handed the lock to B while B's give-back was out?)",
				hb.h.Token(), lease, time.Since(unlockFrom).Seconds())
			m.mu.Unlock()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fairLineAfterADelete: issue 23's defect 6. Owner R holds a fair lock; X
// of the same runtime waits, in the Redis queue. Another client deletes
// the lock (its queue stays), and R acquires again at once as itself,
// before its runtime can know: R's hold is gone, so it must queue behind
// X. The check: X, first in line for a free lock, is granted before R (at
// the latest when its re-check at R's lease comes), not left waiting out
// its wait time while R is served ahead of it or nobody is.
func (wk *worker) fairLineAfterADelete() {
	m, c := wk.w.model, wk.w.cfg
	rt, gen, _ := wk.slotNow()
	n, owner := wk.take(kFair, scFairLine, gen)
	if n == nil {
		return
	}
	defer m.free(n)
	r, x := owner("r"), owner("x")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lock := func(owner string) *actorlock.Lock { return rt.FairLock(n.name, actorlock.WithOwner(owner)) }
	hr := (<-wk.acquireAsync(ctx, n, gen, lock(r), "scenario fair line: R", 2*time.Second)).hd
	if hr == nil {
		return
	}
	defer wk.release(n, hr)
	const wait = 6 * time.Second
	xc := wk.acquireAsync(ctx, n, gen, lock(x), "scenario fair line: X", wait)
	queue := "redisson_lock_queue:{" + n.name + "}"
	for !slices.Contains(wk.w.admin.LRange(ctx, queue, 0, -1).Val(), x) {
		select {
		case o := <-xc:
			wk.release(n, o.hd)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	from := time.Now()
	m.breakName(n, from, from.Add(5*time.Second+c.callTimeout)) // before the call (see force)
	err := wk.w.admin.Del(ctx, n.name).Err()
	if err == nil {
		m.deleted(n, from, time.Now())
	}
	m.mu.Lock()
	n.record(wk.id, "scenario fair line: DEL by another client -> %s", errKind(err))
	m.mu.Unlock()
	if err != nil {
		wk.release(n, (<-xc).hd)
		return
	}
	rc := wk.acquireAsync(ctx, n, gen, lock(r), "scenario fair line: R again", wait)
	// X's re-check comes at R's lease at the latest (R's hold was renewed
	// to at most a lease before X's attempt); tol for a loaded machine.
	bound := c.maxLease() + c.tol
	var ox, oR outcome
	xDone, rDone := false, false
	rFirst := false
	// Until X is answered, R is granted, or the bound: an R that fails
	// first (a refused connection) says nothing of X.
	deadline := time.After(time.Until(from.Add(bound)))
	for xc1, rc1 := xc, rc; !xDone && !rFirst; {
		timedOut := false
		select {
		case ox = <-xc1:
			xDone = true
		case oR = <-rc1:
			rDone, rFirst, rc1 = true, oR.err == nil, nil
		case <-deadline:
			timedOut = true
		}
		if timedOut {
			break
		}
	}
	late := !xDone && !rFirst
	// Faults until now count: one during X's wait excuses it.
	judged := m.faultless(n, from, true)
	// Let each go as soon as it is granted, so that the other can be.
	if !xDone {
		if rDone {
			wk.release(n, oR.hd)
		}
		ox = <-xc
	}
	wk.release(n, ox.hd)
	if !rDone {
		oR = <-rc
	}
	wk.release(n, oR.hd)
	// A Close mid-run answers both with ErrClosed; a connection refused
	// (the dial hook's, which spares no name) fails X's attempt for good.
	if !judged || errors.Is(ox.err, actorlock.ErrClosed) || errors.Is(oR.err, actorlock.ErrClosed) || ox.err != nil && !errors.Is(ox.err, actorlock.ErrNotAcquired) {
		return
	}
	wk.w.judged[scFairLine].Add(1)
	if rFirst || late || ox.err != nil {
		m.mu.Lock()
		m.fail("a fair lock serves its queue in order", n, []string{x, r},
			"X, first in the Redis queue when the lock was deleted, was not granted within %v (R's lease; X's re-check is due then): R, queued behind it, was served first: %v; X got %s after %.3fs",
			bound, rFirst, errKind(ox.err), time.Since(from).Seconds())
		m.mu.Unlock()
	}
}
