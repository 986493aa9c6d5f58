package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/actorlock/actorlock"
)

// Scenarios of the shapes issue 31's review used (defects A-E), each on a
// scenario name with faults aimed at the calls that matter. The exact
// checks judge what follows them (checkExclusion: another owner granted
// while a hold was valid; checkLoss: a hold lost with no cause the docs
// allow); the fair order has a check of its own. Another owner contends
// from another runtime when there is one: a local contender is refused
// without asking Redis while the runtime believes it holds.

// unlockScripts are the release scripts, whose ARGV[1] is the owner (the
// write field for a write release) and ARGV[4] the count a give-back
// expects ("" for a release; argv[3] here, counting from 0); the exclusive
// kinds' (lock_unlock, fair_unlock, rw_write_unlock: release.lua) also
// carry a give-back's fencing token, in ARGV[5] (fair_unlock: ARGV[9]).
var unlockScripts = []string{"lock_unlock", "lock_handoff", "fair_unlock", "rw_write_unlock", "rw_read_unlock"}

// isRelease matches a release (not a give-back) of field on name.
func isRelease(name, field string) func(scriptCall) bool {
	return func(sc scriptCall) bool {
		// Not a give-back: an unlock without a count to expect (argv[3]),
		// or a hand-off.
		return slices.Contains(unlockScripts, sc.script) && arg(sc.keys, 0) == name && arg(sc.argv, 0) == field &&
			(sc.script == "lock_handoff" || arg(sc.argv, 3) == "")
	}
}

// acquireOnce is one tracked acquisition by a scenario, waiting up to wait.
// write: l is a write side.
func (wk *worker) acquireOnce(ctx context.Context, n *nameState, gen int, l *actorlock.Lock, write bool, what string, wait time.Duration, opts ...actorlock.AcquireOption) *hold {
	return wk.acquireOn(ctx, n, wk.s.idx, gen, l, write, what, wait, opts...)
}

// acquireOn is acquireOnce through the runtime in slot (l is its lock).
func (wk *worker) acquireOn(ctx context.Context, n *nameState, slot, gen int, l *actorlock.Lock, write bool, what string, wait time.Duration, opts ...actorlock.AcquireOption) *hold {
	c := wk.w.cfg
	wk.w.ops.Add(1)
	asked := time.Now()
	h, err := wk.tracked(n, "", what, wait+c.callTimeout+c.tol, func() (*actorlock.Held, error) {
		return l.Acquire(ctx, append(opts, actorlock.WaitTime(wait))...)
	})
	return wk.acquiredOn(n, slot, gen, h, err, what, asked, write)
}

// pause waits d, or until the run ends (false then).
func (wk *worker) pause(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-wk.w.ctx.Done():
		return false
	}
}

// otherSlot is another runtime than the worker's, if the run has one.
func (wk *worker) otherSlot() *slot {
	if len(wk.w.slots) < 2 {
		return nil
	}
	for {
		if s := wk.w.slots[wk.rng.IntN(len(wk.w.slots))]; s != wk.s {
			return s
		}
	}
}

// contend has another owner, of another runtime, try for n's lock (write:
// its write side) for up to wait, and release what it gets: a grant while
// a scenario's hold is valid is the exclusion check's to flag.
func (wk *worker) contend(n *nameState, write bool, wait time.Duration, what string) {
	s := wk.otherSlot()
	if s == nil {
		return
	}
	rt, gen := s.current()
	ctx, cancel := context.WithTimeout(wk.w.ctx, wait+wk.w.cfg.callTimeout)
	defer cancel()
	c := wk.w.cfg
	wk.w.ops.Add(1)
	asked := time.Now()
	h, err := wk.tracked(n, "", what, wait+c.callTimeout+c.tol, func() (*actorlock.Held, error) {
		return handle(rt, n, write).Acquire(ctx, actorlock.WaitTime(wait))
	})
	m := wk.w.model
	if err != nil {
		m.mu.Lock()
		n.record(wk.id, "%s -> %s", what, errKind(err))
		m.mu.Unlock()
		return
	}
	hd := m.addHold(n, wk.id, s.idx, gen, h, write, false, asked)
	wk.release(n, hd)
}

// reentered is how the scenarios of A and D start: an owner of this
// runtime holds a name of any kind (the write side of a read-write one)
// twice, by a re-entry. done releases what is left and frees the name; n
// is nil if the scenario cannot go on.
func (wk *worker) reentered(sc int, what string) (n *nameState, f *faults, outer, inner *hold, done func()) {
	rt, gen, f := wk.slotNow()
	kind := []int{kLock, kFair, kRW}[wk.rng.IntN(3)]
	if n, _ = wk.take(kind, sc, gen); n == nil {
		return nil, nil, nil, nil, nil
	}
	ctx, cancel := context.WithTimeout(wk.w.ctx, 30*time.Second) // the run's end cuts it short
	done = func() {
		wk.release(n, outer)
		cancel()
		wk.w.model.free(n)
	}
	l := handle(rt, n, kind == kRW)
	if outer = wk.acquireOnce(ctx, n, gen, l, kind == kRW, what+": outer", time.Second); outer != nil {
		inner = wk.acquireOnce(outer.h.Context(), n, gen, l, kind == kRW, what+": inner", time.Second)
	}
	if inner == nil {
		done()
		return nil, nil, nil, nil, nil
	}
	return n, f, outer, inner, done
}

// lateRelease: defect A. An owner holds twice (a re-entry); the inner
// Unlock's first attempt fails to the runtime as a read timeout while the
// very command reaches Redis later, after the runtime's retry released the
// inner hold. It must not release the outer one.
func (wk *worker) lateRelease() {
	n, f, _, inner, done := wk.reentered(scLateRelease, "scenario late release")
	if n == nil {
		return
	}
	defer done()
	delay := f.readTimeout + time.Duration(300+wk.rng.IntN(1000))*time.Millisecond
	dup := f.aimAt(&aim{kind: fLateDup, delay: delay, left: 1, match: isRelease(n.name, inner.field)})
	defer f.unaim(dup)
	err := wk.unlockCall(n, inner, 10*time.Second, "scenario late release: inner unlock")
	var seen time.Time
	select {
	case seen = <-dup.seen:
	default:
		return
	}
	if err != nil {
		return
	}
	wk.w.judged[scLateRelease].Add(1)
	if !wk.pause(time.Until(seen.Add(delay + 200*time.Millisecond))) {
		return
	}
	wk.contend(n, inner.write, 500*time.Millisecond, "scenario late release: another owner")
}

// releaseOutage: defect D. An owner holds twice; the inner release's first
// attempt runs and its reply is lost, then its every attempt fails before
// it is sent for longer than the call timeout (how long its latch lives).
// The runtime carries the release through: once, not twice.
func (wk *worker) releaseOutage() {
	n, f, _, inner, done := wk.reentered(scReleaseOutage, "scenario release outage")
	if n == nil {
		return
	}
	defer done()
	window := wk.w.cfg.callTimeout + time.Duration(300+wk.rng.IntN(700))*time.Millisecond
	out := f.aimAt(&aim{kind: fReleaseOutage, window: window, left: 1000, match: isRelease(n.name, inner.field)})
	defer f.unaim(out)
	_ = wk.unlockCall(n, inner, time.Second, "scenario release outage: inner unlock")
	select {
	case <-out.seen:
	default:
		return
	}
	// The runtime retries the release (at most a second apart) until it
	// gets through, after the window.
	select {
	case <-inner.h.Done():
	case <-time.After(window + 3*time.Second):
	case <-wk.w.ctx.Done():
		return
	}
	wk.w.judged[scReleaseOutage].Add(1)
	wk.contend(n, inner.write, 500*time.Millisecond, "scenario release outage: another owner")
}

// lateReentry: defect C. Owner X (WithOwner) holds with a short LeaseTime
// and re-enters; the re-entry's script reaches Redis after the old hold
// expired there (it left late), starting a fresh hold, while the old hold,
// expired locally, is being given back "if X's count is 1". X's new hold
// must stay X's. (An exclusive kind's give-back also asks that the fencing
// counter hold the old hold's token, which a fresh hold moved: a read's has
// only the count to go by.)
func (wk *worker) lateReentry() {
	m, c := wk.w.model, wk.w.cfg
	rt, gen, f := wk.slotNow()
	kind := []int{kLock, kFair, kRW}[wk.rng.IntN(3)]
	n, owner := wk.take(kind, scLateReentry, gen)
	if n == nil {
		return
	}
	defer m.free(n)
	x := owner("x")
	l := handle(rt, n, false, actorlock.WithOwner(x))            // a read-write lock's read side
	ctx, cancel := context.WithTimeout(wk.w.ctx, 30*time.Second) // the run's end cuts it short
	defer cancel()
	const lease = 800 * time.Millisecond
	old := wk.acquireOnce(ctx, n, gen, l, false, "scenario late re-entry: X", time.Second, actorlock.LeaseTime(lease))
	if old == nil {
		return
	}
	defer wk.release(n, old)
	late := f.aimAt(&aim{kind: fDelay, early: true, delay: lease + time.Duration(300+wk.rng.IntN(600))*time.Millisecond, left: 1,
		match: func(sc scriptCall) bool {
			return (sc.script == "lock_acquire" || sc.script == "fair_acquire" || sc.script == "rw_read_acquire") && arg(sc.keys, 0) == n.name && arg(sc.argv, 1) == x
		}})
	defer f.unaim(late)
	// The give-back's reply comes back late: until it does, the runtime
	// cannot know what the give-back did, and a grant it deleted under a
	// live Held is there for the exclusion check to see (heldInRedis).
	slow := f.aimAt(&aim{kind: fDelay, delay: min(500*time.Millisecond, f.readTimeout-50*time.Millisecond), left: 1,
		match: func(sc scriptCall) bool {
			return (sc.script == "lock_unlock" || sc.script == "fair_unlock" || sc.script == "rw_read_unlock") && arg(sc.argv, 3) != "" && // a give-back
				arg(sc.keys, 0) == n.name && arg(sc.argv, 0) == x
		}})
	defer f.unaim(slow)
	again := <-wk.acquireAsync(ctx, n, gen, l, "scenario late re-entry: X again", 5*time.Second)
	if again.hd == nil {
		return
	}
	defer wk.release(n, again.hd)
	select {
	case <-late.hits:
	default:
		return
	}
	wk.w.judged[scLateReentry].Add(1)
	// A give-back still out runs now: X's new hold must stay in Redis
	// while it is valid. Then another owner tries.
	wk.watchHeld(ctx, n, 300*time.Millisecond)
	wk.contend(n, false, c.watchdog/2, "scenario late re-entry: another owner")
}

// downgrade: defect B. A writer takes a read with a short LeaseTime under
// its write, and unlocks the write: the read alone keeps the lock now, for
// its read-hold key's lease. Once that key expired, another process's read
// and release frees the lock, and a writer may get in: the read's
// validity must have ended by then.
func (wk *worker) downgrade() {
	rt, gen, _ := wk.slotNow()
	n, _ := wk.take(kRW, scDowngrade, gen)
	if n == nil {
		return
	}
	defer wk.w.model.free(n)
	ctx, cancel := context.WithTimeout(wk.w.ctx, 30*time.Second) // the run's end cuts it short
	defer cancel()
	w := wk.acquireOnce(ctx, n, gen, handle(rt, n, true), true, "scenario downgrade: write", time.Second)
	if w == nil {
		return
	}
	lease := time.Duration(300+wk.rng.IntN(200)) * time.Millisecond
	r := wk.acquireOnce(w.h.Context(), n, gen, handle(rt, n, false), false, "scenario downgrade: read", time.Second, actorlock.LeaseTime(lease))
	if r == nil {
		wk.release(n, w)
		return
	}
	defer wk.release(n, r)
	if err := wk.unlockCall(n, w, 2*time.Second, "scenario downgrade: write unlock"); err != nil {
		return
	}
	wk.w.judged[scDowngrade].Add(1)
	time.Sleep(lease + 50*time.Millisecond) // the read-hold key expires
	wk.contend(n, false, 300*time.Millisecond, "scenario downgrade: another reader")
	wk.contend(n, true, 300*time.Millisecond, "scenario downgrade: a writer")
}

// fairOrder: defect E. W1's first attempt finds the fair lock free but
// leaves late, past its lease as the runtime counts it: its grant is given
// back, and that give-back is refused until W2, which arrived meanwhile,
// has joined the Redis queue; W1 joins behind it. The lock is then free,
// W2 at the head of the Redis queue and W1 at the front locally: W2 must be
// granted within the holder's lease and the tolerance (as fairLineAfterADelete's
// X), not when W1 gives up.
func (wk *worker) fairOrder() {
	m, c := wk.w.model, wk.w.cfg
	rt, gen, f := wk.slotNow()
	n, owner := wk.take(kFair, scFairOrder, gen)
	if n == nil {
		return
	}
	defer m.free(n)
	// A refused dial ends W1's wait (it fails an attempt for good), and
	// with it the order this scenario checks: most runs went so.
	m.sparingDials.Add(1)
	defer m.sparingDials.Add(-1)
	start := time.Now()
	w1, w2 := owner("w1"), owner("w2")
	lock := func(o string) *actorlock.Lock { return rt.FairLock(n.name, actorlock.WithOwner(o)) }
	ctx, cancel := context.WithTimeout(wk.w.ctx, 30*time.Second) // the run's end cuts it short
	defer cancel()
	const lease = 500 * time.Millisecond
	late := f.aimAt(&aim{kind: fDelay, early: true, delay: lease + 300*time.Millisecond, left: 1, match: func(sc scriptCall) bool {
		return sc.script == "fair_acquire" && arg(sc.keys, 0) == n.name && arg(sc.argv, 1) == w1
	}})
	defer f.unaim(late)
	refuse := f.aimAt(&aim{kind: fBeforeSend, left: 1000, match: func(sc scriptCall) bool {
		return sc.script == "fair_unlock" && arg(sc.keys, 0) == n.name && arg(sc.argv, 0) == w1 && arg(sc.argv, 3) != "" // its give-back
	}})
	defer f.unaim(refuse)
	const wait1, wait2 = 6 * time.Second, 10 * time.Second
	c1 := wk.acquireAsync(ctx, n, gen, lock(w1), "scenario fair order: W1", wait1, actorlock.LeaseTime(lease))
	var o1, o2 outcome
	got1, got2 := false, false
	defer func() {
		if !got1 {
			o1 = <-c1
		}
		wk.release(n, o1.hd)
	}()
	select {
	case <-late.seen:
	case o1 = <-c1:
		got1 = true
		return
	}
	asked2 := time.Now()
	c2 := wk.acquireAsync(ctx, n, gen, lock(w2), "scenario fair order: W2", wait2)
	defer func() {
		if !got2 {
			o2 = <-c2
		}
		wk.release(n, o2.hd)
	}()
	queue := "redisson_lock_queue:{" + n.name + "}"
	joined := time.Now().Add(5 * time.Second)
	for q := m.w.admin.LRange(ctx, queue, 0, -1).Val(); !(len(q) == 1 && q[0] == w2); q = m.w.admin.LRange(ctx, queue, 0, -1).Val() {
		if time.Now().After(joined) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.unaim(refuse)
	at := time.Now()
	// CLIENT PAUSE WRITE holds W2's scripts too: the time Redis was
	// paused (and a lease after) does not count. It used to end the run
	// unjudged, which most runs were.
	bound := func() time.Duration { return c.maxLease() + c.tol + m.stalled(at, time.Now()) }
	for !got2 && time.Since(at) <= bound() {
		select {
		case o2 = <-c2:
			got2 = true
		case <-time.After(20 * time.Millisecond):
		case <-wk.w.ctx.Done():
			return
		}
	}
	// A Close mid-run, or a connection refused (the dial hook's, which
	// spares no name), ends W2's wait with an error; W2's own wait ending
	// first, or a restart, leaves nothing to judge.
	if !m.faultless(n, start, false) || got2 && o2.err != nil && !errors.Is(o2.err, actorlock.ErrNotAcquired) ||
		time.Since(at) >= wait2-time.Since(asked2) {
		return
	}
	wk.w.judged[scFairOrder].Add(1)
	if !got2 || o2.err != nil {
		bound := bound() // stalled takes m.mu
		m.mu.Lock()
		m.failKnown(defect31('E'), "a free fair lock goes to the head of its Redis queue", n, []string{w1, w2},
			"W2, first in the Redis queue once W1's late grant was given back (W1 joined behind it), was not granted within %v of that (got %v)%s", bound.Round(time.Millisecond), describe(got2, o2.err), shaped(defect31('E')))
		m.mu.Unlock()
	}
}

func describe(got bool, err error) string {
	if !got {
		return "no answer yet"
	}
	return fmt.Sprint(errKind(err))
}
