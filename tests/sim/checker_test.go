package sim

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/observe"
)

// Bounds, from the README's guarantees and the options the world uses:
//   - lossBound(h): a Held whose owner is missing from Redis closes Done
//     within its lease (the watchdog renews every lease/3; without renewal
//     the local deadline is a lease minus drift after the last renewal was
//     sent), plus the tolerance for a loaded machine.
//   - orphanBound: a hold in Redis that no live Held or request accounts
//     for is gone within the call timeout (a give-back and its retries)
//     plus a lease (a renewal that ran but whose reply was lost keeps it
//     that long), plus the tolerance.
//   - tol: how late a timer or a reply may be on this loaded machine.
func (m *model) lossBound(h *hold) time.Duration { return h.lease + m.w.cfg.tol }

func (m *model) orphanBound() time.Duration {
	c := m.w.cfg
	return c.callTimeout + c.maxLease() + c.tol
}

// sweep checks every name against Redis and the library's objects.
func (m *model) sweep(ctx context.Context) {
	w := m.w
	m.mu.Lock()
	epochs := make([]map[string]uint64, len(m.list))
	for i, n := range m.list {
		e := make(map[string]uint64, len(n.epoch))
		for f, v := range n.epoch {
			e[f] = v
		}
		epochs[i] = e
	}
	m.mu.Unlock()
	t0 := time.Now()
	pipe := w.admin.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(m.list))
	for i, n := range m.list {
		cmds[i] = pipe.HGetAll(ctx, n.name)
	}
	_, err := pipe.Exec(ctx)
	redisOK := err == nil
	listed := w.listHeld()
	now := time.Now()

	m.mu.Lock()
	defer m.mu.Unlock()
	for i, n := range m.list {
		var fields map[string]string
		if redisOK {
			fields = cmds[i].Val()
			m.checkRedisExclusion(n, fields)
		}
		if redisOK {
			n.free = append(n.free, sample{t0, len(fields) == 0})
			if len(n.free) > 200 {
				n.free = append(n.free[:0], n.free[len(n.free)-150:]...)
			}
		}
		m.checkHolds(n, fields, redisOK, epochs[i], t0, now)
		if redisOK {
			m.checkCounts(n, fields, epochs[i], t0)
		}
		m.checkConflicts(n, now)
	}
	m.checkListed(listed, now)
	for _, r := range m.reqs {
		if now.Sub(r.start) > r.bound {
			m.fail("every request is answered in time", m.names[r.name], nil,
				"%s by worker %d started %.3fs ago, bound %v, no answer yet", r.what, r.worker, now.Sub(r.start).Seconds(), r.bound)
		}
	}
}

// checkRedisExclusion: at most one owner in Redis (readers excepted).
func (m *model) checkRedisExclusion(n *nameState, fields map[string]string) {
	var owners, writers []string
	for f := range fields {
		if f == "mode" {
			continue
		}
		owners = append(owners, f)
		if strings.HasSuffix(f, ":write") {
			writers = append(writers, f)
		}
	}
	switch {
	case n.kind != kRW && len(owners) > 1:
		m.fail("at most one owner per lock in Redis", n, owners, "hash holds %v", fields)
	case n.kind == kRW && len(writers) > 1:
		m.fail("at most one writer per read-write lock in Redis", n, owners, "hash holds %v", fields)
	case n.kind == kRW && len(writers) == 1:
		w := strings.TrimSuffix(writers[0], ":write")
		for _, o := range owners {
			if o != writers[0] && o != w {
				m.fail("no reader of another owner beside a writer in Redis", n, owners, "hash holds %v", fields)
			}
		}
	}
}

func doneNow(h *hold) bool {
	select {
	case <-h.h.Done():
		return true
	default:
		return false
	}
}

// checkHolds follows each hold's Done and judges the holds not done.
func (m *model) checkHolds(n *nameState, fields map[string]string, redisOK bool, epochs map[string]uint64, t0, now time.Time) {
	tol := m.w.cfg.tol
	for id, h := range n.holds {
		if !h.live() {
			if now.Sub(h.doneSeen) > 2*m.orphanBound() {
				delete(n.holds, id)
				delete(m.byTok, tokKey{n.name, h.owner, h.h.Token()})
			}
			continue
		}
		if doneNow(h) {
			h.doneSeen = now
			cause := h.h.Err()
			n.record(-1, "Done of %s token %d: %s", short(h.owner), h.h.Token(), errKind(cause))
			if errors.Is(cause, actorlock.ErrLost) || errors.Is(cause, actorlock.ErrClosed) {
				// A lost or closed hold is given back in Redis when
				// Redis answers: its field may stay that long.
				m.taint(n, h.field, now)
			}
			// After Unlock returned nil, Done's cause may still be
			// ErrLost: the local deadline (lease - drift) may pass
			// while the release is on its way, which is not a fault.
			if !h.toldLost.IsZero() && !errors.Is(cause, actorlock.ErrLost) && !errors.Is(cause, actorlock.ErrClosed) {
				m.failKnown(known5(n, h), "Unlock's result matches the Held", n, []string{h.field}, "Unlock returned ErrLost but Done's cause is %v", cause)
			}
			continue
		}
		switch {
		case !h.released.IsZero() && now.Sub(h.released) > tol:
			m.failKnown(known5(n, h), "Unlock's result matches the Held", n, []string{h.field},
				"Unlock returned nil %.3fs ago; Done is still open (Err %v)", now.Sub(h.released).Seconds(), h.h.Err())
		case !h.toldLost.IsZero() && now.Sub(h.toldLost) > tol:
			m.failKnown(known5(n, h), "Unlock's result matches the Held", n, []string{h.field},
				"Unlock returned ErrLost %.3fs ago; Done is still open (Err %v) and the hold may be renewed for nobody", now.Sub(h.toldLost).Seconds(), h.h.Err())
		case !h.abandoned.IsZero() && now.Sub(h.abandoned) > m.orphanBound():
			m.failKnown(4, "nothing is kept for a caller who let it go", n, []string{h.field},
				"member of a group unlocked %.3fs ago is still held (Err %v)", now.Sub(h.abandoned).Seconds(), h.h.Err())
		}
		if !h.group {
			for _, d := range n.deletes {
				// Its hold was deleted under it: the watchdog's next
				// renewal finds it gone, or the lease runs out, and a
				// re-entry since (finding a count of 1) ends it too.
				if h.since.Before(d.from) && now.Sub(d.to) > m.lossBound(h) {
					m.fail("a Held whose lock was deleted in Redis closes Done within its lease", n, []string{h.field},
						"token %d (lease %v) acquired before a DEL %.3fs ago; its Done is still open", h.h.Token(), h.lease, now.Sub(d.to).Seconds())
					break
				}
			}
		}
		if !redisOK || h.unlocking > 0 || !h.ctxUnlock.IsZero() || !h.released.IsZero() || !h.toldLost.IsZero() || !h.abandoned.IsZero() || epochs[h.field] != n.epoch[h.field] {
			h.absentSince = time.Time{}
			continue
		}
		if c, _ := strconv.Atoi(fields[h.field]); c > 0 {
			h.absentSince = time.Time{}
			continue
		}
		if h.absentSince.IsZero() {
			h.absentSince = t0
		}
		if now.Sub(h.absentSince) > m.lossBound(h) {
			m.failKnown(known5(n, h), "a Held not Done is held in Redis by its owner", n, []string{h.field},
				"token %d (lease %v) has been missing from Redis for %.3fs and its Done is still open", h.h.Token(), h.lease, now.Sub(h.absentSince).Seconds())
		}
	}
}

// known5: an Unlock told ErrLost after an earlier Unlock of the hold (or
// of another hold of its owner) failed or returned its ctx's error: the
// shape of issue 23's defect 5.
func known5(n *nameState, h *hold) int {
	if !h.ctxUnlock.IsZero() || n.unlockFailed[h.owner] {
		return 5
	}
	if t, ok := n.concurrentUnlock[h.owner]; ok && t.After(h.since) {
		// Found by this simulation (no fault needed): two Helds of one
		// owner unlocked at once; one Unlock says ErrLost and its Held
		// never ends. Numbered 8 here, after issue 23's seven.
		return 8
	}
	return known2(n, h)
}

// known2: h was lost to a force-unlock or DEL and its owner acquired the
// name again since: the shape of issue 23's defect 2 (the new acquisition
// merged into the lost hold).
func known2(n *nameState, h *hold) int {
	for _, b := range append(append([]interval(nil), n.breaks...), n.restarts...) {
		// An older hold the break may have ended, and a newer one of the
		// same owner granted after the break began.
		for _, o1 := range n.holds {
			for _, o2 := range n.holds {
				if o1.owner == h.owner && o2.owner == h.owner && o1.since.Before(o2.since) && o1.since.Before(b.to) && o2.since.After(b.from) {
					return 2
				}
			}
		}
	}
	return 0
}

// believed is the number of holds of field the library should count in
// Redis now; ok is false when one of them is being released or given back.
func believed(n *nameState, field string) (count int, ok bool) {
	for _, h := range n.holds {
		if h.field != field || !h.live() || !h.released.IsZero() || !h.toldLost.IsZero() {
			continue
		}
		if h.unlocking > 0 || !h.ctxUnlock.IsZero() || !h.abandoned.IsZero() {
			return 0, false
		}
		count++
	}
	return count, true
}

// checkCounts: every hold in Redis belongs to a live Held or a request in
// flight, with the count the library believes, give or take orphanBound.
func (m *model) checkCounts(n *nameState, fields map[string]string, epochs map[string]uint64, t0 time.Time) {
	seen := map[string]bool{}
	judge := func(f string) {
		if seen[f] {
			return
		}
		seen[f] = true
		if n.inFlight[f] > 0 || epochs[f] != n.epoch[f] {
			return
		}
		want, ok := believed(n, f)
		if !ok {
			return
		}
		got, _ := strconv.Atoi(fields[f])
		if got == want {
			delete(n.mismatchSince, f)
			return
		}
		since, was := n.mismatchSince[f]
		if !was {
			n.mismatchSince[f] = t0
			return
		}
		if t0.Sub(since) > m.orphanBound() {
			invariant := "every hold in Redis belongs to a live Held or a request in flight"
			if got < want {
				invariant = "every Held not Done is held in Redis with the count the library believes"
			}
			defect := 0
			for _, h := range n.holds {
				if h.field == f && h.live() {
					defect = max(defect, known5(n, h))
				}
			}
			if _, known := n.epoch[f]; !known && want == 0 {
				// A hold no caller ever got back (a grant given back
				// after a cancel, a member of a failed group round),
				// kept: defect 4's shape.
				defect = 4
			}
			m.failKnown(defect, invariant, n, []string{f}, "Redis counts %d, the live Helds %d, for %.3fs (bound %v)", got, want, t0.Sub(since).Seconds(), m.orphanBound())
		}
	}
	for f := range fields {
		if f != "mode" {
			judge(f)
		}
	}
	for _, h := range n.holds {
		if h.live() {
			judge(h.field)
		}
	}
	for f := range n.mismatchSince {
		if !seen[f] {
			delete(n.mismatchSince, f)
		}
	}
}

// checkConflicts: two owners never hold a lock at once, except across a
// fault the README calls unsafe. Done closes before Redis can let another
// owner in; tol allows for Done's timer running late on this machine.
func (m *model) checkConflicts(n *nameState, now time.Time) {
	var live []*hold
	for _, h := range n.holds {
		if h.live() && h.released.IsZero() && h.toldLost.IsZero() && h.unlocking == 0 && h.ctxUnlock.IsZero() && h.abandoned.IsZero() && !doneNow(h) {
			live = append(live, h)
		}
	}
	pairs := map[[2]uint64]bool{}
	for i, a := range live {
		for _, b := range live[i+1:] {
			if !conflict(n, a, b) || m.exempt(n, a, b) {
				continue
			}
			k := [2]uint64{min(a.id, b.id), max(a.id, b.id)}
			pairs[k] = true
			since, was := n.conflictSince[k]
			if !was {
				n.conflictSince[k] = now
				continue
			}
			if now.Sub(since) > m.w.cfg.tol {
				m.fail("at most one owner holds a lock", n, sortedOwners(a, b),
					"tokens %d and %d both live (Done open, Err nil) for %.3fs", a.h.Token(), b.h.Token(), now.Sub(since).Seconds())
			}
		}
	}
	for k := range n.conflictSince {
		if !pairs[k] {
			delete(n.conflictSince, k)
		}
	}
}

// listedHold is an entry of some runtime's rt.Held().
type listedHold struct {
	slot int
	h    observe.HeldLock
}

// checkListed: rt.Held() lists exactly the holds some caller has: an entry
// no caller got back (a member of a failed group round, a grant won by a
// cancelled Acquire) is given up within orphanBound; an entry whose Done
// closed is gone.
func (m *model) checkListed(listed []listedHold, now time.Time) {
	seen := map[tokKey]bool{}
	for _, l := range listed {
		k := tokKey{l.h.Name, l.h.Owner, l.h.Token}
		seen[k] = true
		n := m.names[l.h.Name]
		if n == nil {
			continue
		}
		if h := m.byTok[k]; h != nil {
			if !h.live() && now.Sub(h.doneSeen) > m.w.cfg.tol {
				m.fail("rt.Held() lists only holds not ended", n, []string{h.field}, "token %d listed %.3fs after its Done closed", l.h.Token, now.Sub(h.doneSeen).Seconds())
			}
			continue
		}
		since, was := m.unlisted[k]
		if !was {
			m.unlisted[k] = now
			continue
		}
		if now.Sub(since) > m.orphanBound() {
			m.failKnown(4, "nothing is kept for a caller who let it go", n, []string{l.h.Owner},
				"runtime %d lists a hold (token %d, since %.3fs) that no caller got back, for %.3fs", l.slot, l.h.Token, now.Sub(l.h.Since).Seconds(), now.Sub(since).Seconds())
		}
	}
	for k := range m.unlisted {
		if !seen[k] {
			delete(m.unlisted, k)
		}
	}
}

func (m *model) taint(n *nameState, field string, now time.Time) {
	until := now.Add(m.orphanBound())
	if until.After(n.taint[field]) {
		n.taint[field] = until
	}
}

// checkReleased: after Unlock returned nil for an owner's last hold, with
// nothing else of that owner in flight or being given back, Redis holds
// nothing of it (every Unlock result matches Redis).
func (m *model) checkReleased(ctx context.Context, n *nameState, hd *hold, worker int) {
	field := hd.field
	m.mu.Lock()
	c, ok := believed(n, field)
	if c > 0 || !ok || n.inFlight[field] > 0 || time.Now().Before(n.taint[field]) {
		m.mu.Unlock()
		return
	}
	ep := n.epoch[field]
	m.mu.Unlock()
	v, err := m.w.admin.HGet(ctx, n.name, field).Result()
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ep != n.epoch[field] {
		return
	}
	if c, ok := believed(n, field); c > 0 || !ok {
		return
	}
	if v != "" && v != "0" {
		// A failed Unlock retried after a re-entry is defect 3's shape.
		defect := 0
		if hd.failedUnlock || n.unlockFailed[hd.owner] {
			defect = 3
		}
		m.failKnown(defect, "every Unlock result matches Redis", n, []string{field},
			"worker %d's Unlock of token %d (the owner's last hold; an earlier Unlock of it failed: %v) returned nil, yet Redis still counts %s for it", worker, hd.h.Token(), hd.failedUnlock, v)
	}
}

// checkStarved: a fair waiter that waited its whole (long) wait time in
// vain must not have done so while the lock stood free. Bound: stale queue
// entries ahead of it (waiters whose leave was lost) expire one fair wait
// timeout after another (two allowed); a lost wake-up costs at most a
// lease (the waiter re-checks); leases for holders lost meanwhile; tol.
// Windows of CLIENT PAUSE WRITE and restarts (and a lease after) do not
// count as free.
func (m *model) checkStarved(n *nameState, from, to time.Time, worker int) {
	c := m.w.cfg
	bound := 2*c.fairWait + 3*c.maxLease() + c.tol
	var streak time.Time
	for _, s := range n.free {
		if s.t.Before(from) || s.t.After(to) {
			continue
		}
		stalled := false
		for _, iv := range m.stalls {
			stalled = stalled || !s.t.Before(iv.from) && s.t.Before(iv.to)
		}
		if !s.free || stalled {
			streak = time.Time{}
			continue
		}
		if streak.IsZero() {
			streak = s.t
		}
		if s.t.Sub(streak) > bound {
			m.fail("a fair waiter is not left waiting while the lock is free", n, nil,
				"worker %d waited %.1fs and got ErrNotAcquired; the lock was free at every look for %.1fs (bound %v) from %.3fs",
				worker, to.Sub(from).Seconds(), s.t.Sub(streak).Seconds(), bound, streak.Sub(m.w.start).Seconds())
			return
		}
	}
}
