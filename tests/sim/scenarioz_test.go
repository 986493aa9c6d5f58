package sim

import (
	"context"
	"time"

	"github.com/actorlock/actorlock"
)

// lateGiveBack: finding Z (tests/exactsafety_test.go,
// TestLateGiveBackSparesAFreshHoldOfItsOwnerID). Owner X (WithOwner) of
// this runtime asks for the lock with a short LeaseTime; its first attempt
// leaves late, after the caller stopped waiting, and Redis grants it: the
// runtime gives that grant back ("if X's count is 1 and the counter holds
// its token"), and every try of that give-back is refused before it is sent
// until the grant expired in Redis and X took a fresh hold through another
// runtime (Redis counts both under one field). Then the give-back gets
// through: the counter holds the fresh hold's token, so it must leave that
// hold alone. Another owner of this runtime then tries: a grant while X's
// fresh hold is valid is the exclusion check's to flag (and its loss the
// loss check's).
func (wk *worker) lateGiveBack() {
	m, c := wk.w.model, wk.w.cfg
	other := wk.otherSlot()
	if other == nil {
		return // one runtime: no other to hold X through
	}
	rt, gen, f := wk.slotNow()
	n, owner := wk.take(kLock, scLateGiveBack, gen)
	if n == nil {
		return
	}
	defer m.free(n)
	rtB, genB := other.current()
	x := owner("x")
	start := time.Now()
	ctx, cancel := context.WithTimeout(wk.w.ctx, 30*time.Second) // the run's end cuts it short
	defer cancel()
	const lease, wait = 800 * time.Millisecond, 300 * time.Millisecond
	late := f.aimAt(&aim{kind: fDelay, early: true, delay: wait + time.Duration(400+wk.rng.IntN(400))*time.Millisecond, left: 1,
		match: func(sc scriptCall) bool {
			return sc.script == "lock_acquire" && arg(sc.keys, 0) == n.name && arg(sc.argv, 1) == x
		}})
	defer f.unaim(late)
	isGiveBack := func(sc scriptCall) bool {
		return sc.script == "lock_unlock" && arg(sc.keys, 0) == n.name && arg(sc.argv, 0) == x && arg(sc.argv, 3) != ""
	}
	refuse := f.aimAt(&aim{kind: fBeforeSend, left: 1000, match: isGiveBack})
	defer f.unaim(refuse)
	if a := wk.acquireOnce(ctx, n, gen, rt.Lock(n.name, actorlock.WithOwner(x)), false, "scenario late give-back: X", wait,
		actorlock.LeaseTime(lease)); a != nil {
		wk.release(n, a) // its attempt was not the late one
		return
	}
	// The late attempt is granted; its give-back is refused.
	select {
	case <-late.hits:
	case <-time.After(c.callTimeout):
		return
	}
	select {
	case <-refuse.seen:
	case <-time.After(c.callTimeout):
		return
	}
	// The late grant expires in Redis (its give-back still refused).
	gone := time.Now().Add(lease + time.Second)
	for wk.w.admin.Exists(ctx, n.name).Val() != 0 {
		if time.Now().After(gone) || ctx.Err() != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	// X takes a fresh hold through the other runtime.
	wk.w.ops.Add(1)
	askedB := time.Now()
	bctx, bcancel := context.WithTimeout(ctx, time.Second+c.callTimeout)
	h, err := wk.tracked(n, x, "scenario late give-back: X through another runtime", time.Second+c.callTimeout+c.tol, func() (*actorlock.Held, error) {
		return rtB.Lock(n.name, actorlock.WithOwner(x)).Acquire(bctx, actorlock.WaitTime(time.Second))
	})
	bcancel()
	if err != nil {
		m.mu.Lock()
		n.record(wk.id, "scenario late give-back: X through another runtime -> %s", errKind(err))
		m.mu.Unlock()
		return
	}
	hb := m.addHold(n, wk.id, other.idx, genB, h, false, false, askedB)
	m.mu.Lock()
	m.taint(n, hb.field, time.Now())
	m.mu.Unlock()
	defer wk.release(n, hb)
	if v := wk.w.admin.HGet(ctx, n.name, x).Val(); v != "1" {
		return // not the fresh hold this scenario is about
	}
	// Let the give-back through, and see a try of it run.
	tries := f.aimAt(&aim{kind: fDelay, left: 1, match: isGiveBack})
	defer f.unaim(tries)
	f.unaim(refuse)
	select {
	case <-tries.hits:
	case <-time.After(c.callTimeout):
		return
	case <-wk.w.ctx.Done():
		return
	}
	if !m.faultless(n, start, false) || h.Err() != nil {
		return
	}
	wk.w.judged[scLateGiveBack].Add(1)
	// Another owner, of this runtime (B's would refuse it locally).
	wk.w.ops.Add(1)
	askedC := time.Now()
	const cwait = 500 * time.Millisecond
	cctx, ccancel := context.WithTimeout(ctx, cwait+c.callTimeout)
	defer ccancel()
	hc, err := wk.tracked(n, "", "scenario late give-back: another owner", cwait+c.callTimeout+c.tol, func() (*actorlock.Held, error) {
		return rt.Lock(n.name).Acquire(cctx, actorlock.WaitTime(cwait))
	})
	if err != nil {
		m.mu.Lock()
		n.record(wk.id, "scenario late give-back: another owner -> %s", errKind(err))
		m.mu.Unlock()
		return
	}
	wk.release(n, m.addHold(n, wk.id, wk.s.idx, gen, hc, false, false, askedC))
}
