package sim

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
)

// Scenarios of the shapes the exact simulation found and the random
// workload meets too rarely within a minute: one WithOwner id held through
// two runtimes (findings W and X), an Unlock while its owner's re-entry is
// unsettled (finding AA), and a fair waiter that dies before its place was
// ever refreshed (defect F).

// sharedOwner: findings W and X. One WithOwner id, X, held through two
// runtimes at once, as a Redisson thread id two services share: Redis
// counts both runtimes' holds under one field. Runtime A (the worker's)
// holds X; runtime B, of the scenario's own (its holds are not the model's:
// X's count is tainted while they last), holds X too and closes: its
// Close releases its own hold, not the two Redis counts (W: A's valid hold
// would go with it, which the exclusion checks see; then another owner
// tries). Then runtime C holds X, A re-enters (Redis counts 3), C unlocks
// (2) and A re-enters again (3): a count no higher than one seen before
// proves a loss only for an owner id the runtime made, not for X (X: A's
// hold would end lost with no cause the loss check allows).
func (wk *worker) sharedOwner() {
	m, c := wk.w.model, wk.w.cfg
	rtA, genA, _ := wk.slotNow()
	n, owner := wk.take(kLock, scSharedOwner, genA)
	if n == nil {
		return
	}
	defer m.free(n)
	x := owner("x")
	taint := func() {
		m.mu.Lock()
		n.shared[x] = time.Now()
		m.taint(n, x, time.Now())
		m.mu.Unlock()
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(wk.w.ctx, 30*time.Second) // the run's end cuts it short
	defer cancel()
	lockA := rtA.Lock(n.name, actorlock.WithOwner(x))
	a := wk.acquireOn(ctx, n, wk.s.idx, genA, lockA, false, "scenario shared owner: X on A", time.Second)
	if a == nil {
		return
	}
	held := []*hold{a}
	defer func() { wk.release(n, held...) }()
	other := func(what string) (*actorlock.Held, func()) {
		rt, _, closeIt, err := wk.w.mortalRuntime()
		if err != nil {
			return nil, nil
		}
		done := func() {
			cctx, ccancel := context.WithTimeout(context.Background(), c.callTimeout)
			defer ccancel()
			taint()
			closeIt(cctx)
			taint()
		}
		taint()
		h, err := rt.Lock(n.name, actorlock.WithOwner(x)).Acquire(ctx, actorlock.WaitTime(time.Second))
		taint()
		m.mu.Lock()
		n.record(wk.id, "scenario shared owner: %s -> %s", what, errKind(err))
		m.mu.Unlock()
		if err != nil {
			done()
			return nil, nil
		}
		return h, done
	}
	_, closeB := other("X on B")
	if closeB == nil {
		return
	}
	closeB()
	wk.watchHeld(ctx, n, 300*time.Millisecond)
	if !m.faultless(n, start, false) || a.h.Err() != nil {
		return
	}
	wk.w.judged[scSharedOwner].Add(1)
	wk.contend(n, false, 300*time.Millisecond, "scenario shared owner: another owner")

	hc, closeC := other("X on C")
	if closeC == nil {
		return
	}
	defer closeC()
	a2 := wk.acquireOn(a.h.Context(), n, wk.s.idx, genA, lockA, false, "scenario shared owner: X on A, re-entered", time.Second)
	if a2 == nil {
		return
	}
	held = append(held, a2)
	taint()
	err := hc.Unlock(ctx)
	taint()
	m.mu.Lock()
	n.record(wk.id, "scenario shared owner: X on C unlocks -> %s", errKind(err))
	m.mu.Unlock()
	if err != nil {
		return
	}
	if a3 := wk.acquireOn(a.h.Context(), n, wk.s.idx, genA, lockA, false, "scenario shared owner: X on A, re-entered again", time.Second); a3 != nil {
		held = append(held, a3)
	}
}

// settlingReentry: finding AA (TestUnlockWaitsForItsOwnersUnsettledReentry).
// Another client deletes the lock under a hold (unsafe, documented); the
// hold's re-entry finds the lock gone and starts a fresh hold, but its
// reply is lost, and so are those of its settling for a while. An Unlock
// of the old hold called meanwhile must wait for the settling: run at
// once, it would release the fresh hold in the old one's name and report
// success for a hold Redis deleted, which the Unlock's check flags.
func (wk *worker) settlingReentry() {
	m, c := wk.w.model, wk.w.cfg
	rt, gen, f := wk.slotNow()
	kind := []int{kLock, kFair}[wk.rng.IntN(2)]
	n, _ := wk.take(kind, scSettlingReentry, gen)
	if n == nil {
		return
	}
	defer m.free(n)
	ctx, cancel := context.WithTimeout(wk.w.ctx, 30*time.Second) // the run's end cuts it short
	defer cancel()
	l := handle(rt, n, false)
	// A LeaseTime: until the re-entry is settled, the watchdog would renew
	// the fresh hold it may have started, keeping the old Held valid past
	// its lease (safe: its owner holds the lock; docs/guarantees.md).
	old := wk.acquireOnce(ctx, n, gen, l, false, "scenario settling re-entry: hold", time.Second, actorlock.LeaseTime(c.leaseMax))
	if old == nil {
		return
	}
	unlocked := false
	defer func() {
		if !unlocked {
			wk.release(n, old)
		}
	}()
	script := map[int]string{kLock: "lock_acquire", kFair: "fair_acquire"}[kind]
	reentry := func(settle bool) func(scriptCall) bool {
		return func(sc scriptCall) bool {
			return sc.script == script && arg(sc.keys, 0) == n.name && arg(sc.argv, 1) == old.owner && settling(sc) == settle
		}
	}
	tries := f.aimAt(&aim{kind: fLostReply, left: 20, match: reentry(false)})
	defer f.unaim(tries)
	settles := f.aimAt(&aim{kind: fLostReply, left: 2 + wk.rng.IntN(3), match: reentry(true)})
	defer f.unaim(settles)
	start := time.Now()
	if !wk.deleteName(ctx, n, "scenario settling re-entry: DEL by another client") {
		return
	}
	if again := wk.acquireOnce(old.h.Context(), n, gen, l, false, "scenario settling re-entry: re-entry", 200*time.Millisecond); again != nil {
		wk.release(n, again) // no try of it lost its reply
		return
	}
	select {
	case <-settles.seen:
	case <-time.After(c.callTimeout):
		return
	}
	if wk.w.admin.HGet(ctx, n.name, old.owner).Val() != "1" || !m.faultless(n, start, false) {
		return // not the fresh hold this scenario is about
	}
	wk.w.judged[scSettlingReentry].Add(1)
	err := wk.unlockCall(n, old, 2*c.callTimeout+c.maxLease()+c.tol, "scenario settling re-entry: Unlock of the old hold")
	unlocked = isFinal(err)
}

// settling reports whether sc is the settling of a guarded script: its
// last argument is "1" (guard.lua), and it asks what an earlier attempt
// of its request did.
func settling(sc scriptCall) bool {
	return len(sc.keys) > 0 && len(sc.argv) > 0 &&
		strings.HasPrefix(sc.keys[len(sc.keys)-1], "actorlock_request:") && sc.argv[len(sc.argv)-1] == "1"
}

// deleteName has another client DEL n (unsafe: the model breaks n's holds
// over the call, which lasts 2 s at most); false if the DEL failed.
func (wk *worker) deleteName(ctx context.Context, n *nameState, what string) bool {
	m := wk.w.model
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	from := time.Now()
	// Recorded before the call (see force).
	m.breakName(n, from, from.Add(2*time.Second+wk.w.cfg.callTimeout))
	err := wk.w.admin.Del(ctx, n.name).Err()
	if err == nil {
		m.deleted(n, from, time.Now())
	}
	m.mu.Lock()
	n.record(wk.id, "%s -> %s", what, errKind(err))
	m.mu.Unlock()
	return err == nil
}

// deadFairWaiter: defect F (TestFairWaiterDeadBeforeItsFirstRefresh). A
// fair waiter's process dies right after its place reached the queue,
// before its first refresh: a runtime of the scenario's own, every call of
// which fails from then on. The waiter asked to wait far longer than the
// check allows. A live waiter behind it must get the lock within three
// watchdog leases of the holder's Unlock (docs/guarantees.md), plus tol.
func (wk *worker) deadFairWaiter() {
	m, c := wk.w.model, wk.w.cfg
	rt, gen, _ := wk.slotNow()
	n, owner := wk.take(kFair, scDeadFairWaiter, gen)
	if n == nil {
		return
	}
	defer m.free(n)
	ctx, cancel := context.WithTimeout(wk.w.ctx, 60*time.Second) // the run's end cuts it short
	defer cancel()
	holder := wk.acquireOnce(ctx, n, gen, rt.FairLock(n.name), false, "scenario dead fair waiter: holder", time.Second)
	if holder == nil {
		return
	}
	unlocked := false
	defer func() {
		if !unlocked {
			wk.release(n, holder)
		}
	}()
	start := time.Now()
	dead, kill, closeDead, err := wk.w.mortalRuntime()
	if err != nil {
		return
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), c.callTimeout)
		defer ccancel()
		closeDead(cctx)
	}()
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	d := owner("dead")
	gave := make(chan struct{})
	go func() {
		defer close(gave)
		if h, err := dead.FairLock(n.name, actorlock.WithOwner(d)).Acquire(dctx, actorlock.WaitTime(30*time.Second)); err == nil {
			_ = h.Unlock(context.Background()) // not while the holder holds: reported below
		}
	}()
	queue := "redisson_lock_queue:{" + n.name + "}"
	if !wk.queued(ctx, queue, 1) {
		return
	}
	kill()
	dcancel()
	<-gave
	// It waits longer than the check allows, and less than the dead one;
	// the check does not wait for it to give up.
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	live := wk.acquireAsync(lctx, n, gen, rt.FairLock(n.name, actorlock.WithOwner(owner("live"))), "scenario dead fair waiter: live waiter", 20*time.Second)
	time.Sleep(100 * time.Millisecond) // it asks (a waiter of the holder's runtime asks Redis only once the lock is free)
	err = wk.unlockCall(n, holder, 2*c.callTimeout, "scenario dead fair waiter: holder unlocks")
	unlocked = isFinal(err)
	at := time.Now()
	// CLIENT PAUSE WRITE holds the live waiter's scripts too: the time
	// Redis was paused (and a lease after) does not count.
	bound := func() time.Duration { return 3*c.watchdog + c.tol + m.stalled(at, time.Now()) }
	var got outcome
	waiting := true
	for waiting && time.Since(at) <= bound() {
		select {
		case got = <-live:
			waiting = false
		case <-time.After(20 * time.Millisecond):
		}
	}
	took := time.Since(at)
	if waiting {
		lcancel()
		got = <-live
	}
	if got.hd != nil {
		wk.release(n, got.hd)
	}
	wk.s.mu.RLock()
	closed := wk.s.gen != gen // the runtime was closed mid-run
	wk.s.mu.RUnlock()
	// A live waiter that failed within the bound failed for another reason
	// than the line (its wait is far longer): nothing to judge.
	if err != nil || closed || wk.w.ctx.Err() != nil || !waiting && got.err != nil || !m.faultless(n, start, false) {
		return
	}
	wk.w.judged[scDeadFairWaiter].Add(1)
	if waiting {
		m.fail("a dead fair waiter holds up the line for at most three watchdog leases", n, []string{d},
			"the live waiter behind it was still waiting %.1fs after the holder's Unlock (bound %v; it ended with %v)",
			took.Seconds(), bound().Round(time.Millisecond), errKind(got.err))
	}
}

// stalled is how much of [from, to] CLIENT PAUSE WRITE and restarts took
// (each with the lease after it in which waiters may not be served).
func (m *model) stalled(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum time.Duration
	for _, iv := range m.stalls {
		lo, hi := iv.from, iv.to
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if hi.After(lo) {
			sum += hi.Sub(lo)
		}
	}
	return sum
}

// queued waits until queue has at least k places (false if it has not
// within a call timeout).
func (wk *worker) queued(ctx context.Context, queue string, k int64) bool {
	until := time.Now().Add(wk.w.cfg.callTimeout)
	for wk.w.admin.LLen(ctx, queue).Val() < k {
		if time.Now().After(until) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// mortalRuntime is a runtime of a scenario's own, with the slots' options,
// whose process kill ends: every call fails from then on, before it is
// sent, as if the process were gone (it has no Redis state to lose but what
// it wrote). The caller closes it.
func (w *world) mortalRuntime() (rt *actorlock.Runtime, kill func(), closeIt func(context.Context), err error) {
	c := w.cfg
	var dead atomic.Bool
	rdb := redis.NewClient(&redis.Options{Addr: w.srv.Addr, DialTimeout: time.Second, ReadTimeout: 2500 * time.Millisecond, PoolSize: 4, MaxRetries: -1})
	rdb.AddHook(mortal{&dead})
	rt, err = actorlock.New(rdb,
		actorlock.WithWatchdog(c.watchdog), actorlock.WithIdleTimeout(c.idle), actorlock.WithCallTimeout(c.callTimeout),
		actorlock.WithFairWaitTimeout(c.fairWait), actorlock.WithMaxHandoffs(c.handoffs),
		actorlock.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		_ = rdb.Close()
		return nil, nil, nil, err
	}
	closeIt = func(ctx context.Context) {
		_ = rt.Close(ctx)
		_ = rdb.Close()
	}
	return rt, func() { dead.Store(true) }, closeIt, nil
}

// mortal fails every call of a killed runtime before it is sent.
type mortal struct{ dead *atomic.Bool }

var errDead = errors.New("sim: the process is dead")

func (h mortal) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h.dead.Load() {
			return nil, errDead
		}
		return next(ctx, network, addr)
	}
}

func (h mortal) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.dead.Load() {
			cmd.SetErr(errDead)
			return errDead
		}
		return next(ctx, cmd)
	}
}

func (h mortal) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.dead.Load() {
			for _, cmd := range cmds {
				cmd.SetErr(errDead)
			}
			return errDead
		}
		return next(ctx, cmds)
	}
}

// watchHeld is heldInRedis on n alone, every few milliseconds for d: a
// scenario's close look at the window in which its defect would leave a
// valid hold missing from Redis, before the runtime notices (and reports
// the hold lost) at its next renewal.
func (wk *worker) watchHeld(ctx context.Context, n *nameState, d time.Duration) {
	m := wk.w.model
	for until := time.Now().Add(d); time.Now().Before(until) && ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
		m.mu.Lock()
		valid := map[*hold]time.Time{}
		for _, h := range n.holds {
			if h.live() {
				valid[h] = h.h.ValidUntil()
			}
		}
		m.mu.Unlock()
		fields, err := wk.w.admin.HGetAll(ctx, n.name).Result()
		fields = ownerFields(fields)
		t1 := time.Now()
		if err != nil {
			continue
		}
		m.mu.Lock()
		m.heldInRedis(n, fields, valid, t1)
		m.mu.Unlock()
	}
}
