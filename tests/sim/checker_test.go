package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/observe"
	"github.com/actorlock/actorlock/scripts"
)

// Bounds, from the README's guarantees and the options the world uses:
//   - lossBound(h): a Held whose owner is missing from Redis closes Done
//     within its lease (the watchdog renews every lease/3; without renewal
//     the local deadline is a lease minus drift after the last renewal was
//     sent), plus the tolerance for a loaded machine.
//   - orphanBound: a hold in Redis that no live Held or request accounts
//     for is gone within the call timeout (a give-back and its retries)
//     plus a lease (a renewal that ran but whose reply was lost keeps it
//     that long), plus the tolerance; and an Unlock may first wait while
//     its owner's re-entry is settled, two call timeouts plus that
//     attempt's lease at most (docs/guarantees.md, "Exactly once").
//   - tol: how late a timer or a reply may be on this loaded machine.
func (m *model) lossBound(h *hold) time.Duration { return h.lease + m.w.cfg.tol }

func (m *model) orphanBound() time.Duration {
	c := m.w.cfg
	return 3*c.callTimeout + c.maxLease() + c.tol
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
	// Each live hold's validity, read before Redis is (heldInRedis).
	valid := map[*hold]time.Time{}
	for _, n := range m.list {
		for _, h := range n.holds {
			if h.live() {
				valid[h] = h.h.ValidUntil()
			}
		}
	}
	m.promotePending()
	m.mu.Unlock()
	t0 := time.Now()
	pipe := w.admin.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(m.list))
	for i, n := range m.list {
		cmds[i] = pipe.HGetAll(ctx, n.name)
	}
	_, err := pipe.Exec(ctx)
	redisOK := err == nil
	t1 := time.Now()
	listed := w.listHeld()
	now := time.Now()

	m.mu.Lock()
	defer m.mu.Unlock()
	byName := make(map[string]map[string]string, len(m.list))
	for i, n := range m.list {
		var fields map[string]string
		if redisOK {
			fields = ownerFields(cmds[i].Val())
			byName[n.name] = fields
			m.checkRedisExclusion(n, fields)
			m.heldInRedis(n, fields, valid, t1)
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
		m.sweepExclusion(n)
	}
	if redisOK {
		m.checkRounds(byName, listed, now)
	}
	m.checkListed(listed, now)
	for _, r := range m.reqs {
		if now.Sub(r.start) > r.bound {
			m.fail("every request is answered in time", m.historyOf(r.name), nil,
				"%s by worker %d started %.3fs ago, bound %v, no answer yet", r.what, r.worker, now.Sub(r.start).Seconds(), r.bound)
		}
	}
}

// ownerFields is a lock HASH's fields less the holds' mark, which names
// no owner (scripts.HoldMarkField).
func ownerFields(fields map[string]string) map[string]string {
	delete(fields, scripts.HoldMarkField)
	return fields
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
			if errors.Is(cause, actorlock.ErrLost) {
				m.checkLoss(n, h, cause)
			}
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
		if v := h.h.ValidUntil(); v.After(h.validLive) && !doneNow(h) {
			h.validLive = v
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
		if owner := strings.TrimSuffix(h.field, ":write"); !h.group && n.reacquiring[owner] == 0 {
			for _, d := range n.deletes {
				// Its hold was deleted under it: the watchdog's next
				// renewal finds it gone, or the lease runs out, and a
				// re-entry since (finding a count of 1) ends it too;
				// one whose outcome is not known, once it is settled.
				from := d.to
				if u := n.unsettled[owner]; u.After(d.from) && u.After(from) {
					from = u
				}
				if h.since.Before(d.from) && now.Sub(from) > m.lossBound(h) {
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
		// An Unlock that failed or whose ctx ended is carried through by
		// the runtime: until the Held ends, Redis may count it or not.
		if h.unlocking > 0 || !h.ctxUnlock.IsZero() || h.failedUnlock || !h.abandoned.IsZero() {
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
		if seen[f] || m.failedOwners[f] {
			return // a failed round's: checkRounds judges it
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

// checkExclusion is the exact mutual-exclusion check, for hold b just
// granted: every other hold of the name that conflicts with it (another
// owner's; a reader's and a writer's) was valid no later than b's grant,
// unless its Unlock was called before b's grant (its release may have let b
// in) or a fault docs/guarantees.md calls unsafe hit the name in between.
// No timing tolerance: b's grant time is its fencing token (hold.granted),
// and a hold's validity deadline is the runtime's own (Held.ValidUntil),
// whenever its Done happens to close. A hold's deadline only moves on while
// it lives (but for a read release, which may bring a read hold's back),
// and once it ended it is no later than the end; a renewal that lands after
// b's grant cannot succeed unless two owners are in Redis. So reading it at
// any moment after b's grant, and comparing, is exact: here (b's grant
// reaches the model), at every sweep while the older hold lives, and once
// when it has ended (sweepExclusion).
func (m *model) checkExclusion(n *nameState, b *hold) {
	for _, a := range n.holds {
		if a != b {
			m.judgePair(n, a, b)
			m.judgePair(n, b, a)
		}
	}
}

// sweepExclusion compares every hold that lives, or ended since the last
// sweep, with the conflicting grants after it.
func (m *model) sweepExclusion(n *nameState) {
	for _, a := range n.holds {
		if a.exclusionDone {
			continue
		}
		if !a.live() {
			a.exclusionDone = true
		}
		for _, b := range n.holds {
			if b != a {
				m.judgePair(n, a, b)
			}
		}
	}
}

// judgePair flags a, an older hold, still valid when b was granted.
func (m *model) judgePair(n *nameState, a, b *hold) {
	at := b.granted()
	if !conflict(n, a, b) || !a.granted().Before(at) || a.flagged || b.flagged {
		return
	}
	if !a.unlockCalled.IsZero() && a.unlockCalled.Before(at) || m.unsafeDuring(n, a.granted(), at) {
		return
	}
	until := a.h.ValidUntil()
	if !until.After(at) {
		return
	}
	a.flagged, b.flagged = true, true
	d := m.shapeOf(n, a)
	m.failKnown(d, "mutual exclusion (exact): a conflicting hold is granted only after every other hold's validity (Held.ValidUntil)", n, sortedOwners(a, b),
		"token %d was granted at %s while token %d (granted %s, lease %v, Done closed: %v, Err %v) was valid until %s, %v later%s",
		b.h.Token(), at.Format("15:04:05.000000"), a.h.Token(), a.granted().Format("15:04:05.000000"), a.lease, doneNow(a), a.h.Err(),
		until.Format("15:04:05.000000"), until.Sub(at), shaped(d))
}

// invHeldInRedis is the exact mutual-exclusion check's second form.
const invHeldInRedis = "mutual exclusion (exact): a hold is held in Redis while it is valid (Held.ValidUntil), so that no other owner can be granted it"

// heldInRedis is the exact mutual-exclusion check without a contender: a
// hold that was valid through a read of Redis (its validity, read before,
// ran past the read's end, and it had not ended after) was held there by
// its owner at that moment, else another owner could have been granted it
// then. The same excuses as judgePair: its Unlock (or its runtime's
// Close) called before the read ended, a fault docs/guarantees.md calls
// unsafe; and, as checkLoss, a read hold whose owner released part of the
// name meanwhile (its validity then follows the read-hold keys left, and
// may move back). fields: n's hash as the sweep read it, ending at t1.
func (m *model) heldInRedis(n *nameState, fields map[string]string, valid map[*hold]time.Time, t1 time.Time) {
	for _, h := range n.holds {
		v0, ok := valid[h]
		if !ok || !v0.After(t1) || h.flagged || !h.live() || doneNow(h) || !h.unlockCalled.IsZero() && h.unlockCalled.Before(t1) {
			continue
		}
		if c, _ := strconv.Atoi(fields[h.field]); c > 0 {
			continue
		}
		if m.unsafeDuring(n, h.granted(), t1) || m.closingBefore(h.slot, h.gen, t1) {
			continue
		}
		if rw, ok := n.rwReleased[h.owner]; ok && n.kind == kRW && !h.write && rw.After(h.since.Add(-m.w.cfg.callTimeout)) {
			continue
		}
		h.flagged = true
		d := m.shapeOf(n, h)
		m.failKnown(d, invHeldInRedis, n, []string{h.field},
			"token %d (granted %s, lease %v, LeaseTime %v) was valid until %s at least, and Redis did not hold it for %s in a read that ended at %s, %v before%s",
			h.h.Token(), h.granted().Format("15:04:05.000000"), h.lease, h.leased, v0.Format("15:04:05.000000"), h.field, t1.Format("15:04:05.000000"), v0.Sub(t1), shaped(d))
	}
}

// closingBefore reports whether the Close of slot's runtime generation gen
// began before t (m.mu held): Close releases every hold, as Unlock does.
func (m *model) closingBefore(slot, gen int, t time.Time) bool {
	at, ok := m.closing[[2]int{slot, gen}]
	return ok && at.Before(t)
}

// drift is the runtime's drift allowance for a lease: max(1 % + 2 ms,
// 25 ms), at most a quarter of the lease (docs/guarantees.md,
// "Loss is reported").
func drift(lease time.Duration) time.Duration {
	return min(max(lease/100+2*time.Millisecond, 25*time.Millisecond), lease/4)
}

// checkLoss judges a hold h whose Done closed with ErrLost (cause), which
// no Unlock of it was called for. The docs allow a loss only for a cause
// they name; anything else is a violation. The rule, exactly:
//
//  1. Excused: a fault the docs call unsafe hit the name while h lived
//     (unsafeDuring), or the runtime ended h because a re-entry of its
//     owner had an outcome that stayed unknown after every try
//     (docs/guarantees.md, "Exactly once"), with a fault on a call of the
//     name while h lived.
//  2. Else h must not have ended before its validity deadline: the
//     runtime ends a hold early only when Redis shows it gone or taken,
//     which no safe fault can do (Redis counts a lease from when a script
//     ran; the runtime from when it was sent, less a drift allowance). The
//     deadline is the latest Held.ValidUntil read while h lived (exact: it
//     only moves on), and at least its acquisitions' own leases (asked +
//     lease - drift: they left no earlier), Extend's, and each renewal the
//     runtime saw confirmed in time (renewals: sent + watchdog lease -
//     drift), for it and every acquisition of its owner alive with it. A
//     read-write hold whose owner released part of it meanwhile is judged
//     by its end alone (validity then follows the read-hold keys left).
//  3. A hold its owner's watchdog renewed (an acquisition without
//     LeaseTime), lost at its deadline: faults must have kept every renewal
//     of it from being confirmed for the lease before its end: each
//     renewal call of it sent in that lease failed or came back too late
//     (a call fails here only by a fault, injected or unforced), and if
//     none was sent then, a renewal call of its runtime was held up (the
//     watchdog sends no round while one is out), or this process was
//     paused. A LeaseTime hold lost at its deadline reached the end of its
//     lease: allowed.
//
// Two allowances, neither on the exclusion check: sendSlack for a renewal's
// send seen by the hook a moment after the runtime took its time, and
// applyLag for a confirmation to reach the lock actor once its reply is in.
func (m *model) checkLoss(n *nameState, h *hold, cause error) {
	c := m.w.cfg
	end := h.h.ValidUntil() // the end, or the deadline if that came first
	if !h.unlockCalled.IsZero() && h.unlockCalled.Before(end) || h.flagged {
		return // its release may have ended it
	}
	if m.unsafeDuring(n, h.granted(), end.Add(c.applyLag)) {
		return
	}
	if (strings.Contains(cause.Error(), "re-entry's outcome stayed unknown") ||
		// A release of the owner (another acquisition's) whose outcome
		// Redis never confirmed, settling included, may have released
		// this one's count: it ends as lost (documented).
		strings.Contains(cause.Error(), "an unlock's outcome could not be learnt")) && (n.lastFault.After(h.since) || m.lastFault.After(h.since)) {
		return
	}
	fail := func(invariant, format string, args ...any) {
		h.flagged = true
		d := m.shapeOf(n, h)
		m.failKnown(d, invariant, n, []string{h.field}, "token %d (granted %s, lease %v, LeaseTime %v) ended %s with %v: "+format+"%s",
			append(append([]any{h.h.Token(), h.granted().Format("15:04:05.000"), h.lease, h.leased, end.Format("15:04:05.000"), cause}, args...), shaped(d))...)
	}
	if rw, ok := n.rwReleased[h.owner]; ok && n.kind == kRW && rw.After(h.since.Add(-c.callTimeout)) {
		return
	}
	const early = "no loss before the validity the runtime gave a hold (checkLoss rule 2)"
	if end.Before(h.validLive) {
		fail(early, "the runtime had counted it valid until %s (%v later)", h.validLive.Format("15:04:05.000"), h.validLive.Sub(end))
		return
	}
	L := c.watchdog
	var bound time.Time
	by := ""
	raise := func(t time.Time, what string) {
		if t.After(bound) {
			bound, by = t, what
		}
	}
	// The acquisitions of h's owner alive with it share its validity; not
	// one whose Unlock was called before h was granted: its release may
	// have freed the lock first, and h started a fresh hold, which what
	// renewed that one does not cover.
	var siblings []*hold
	for _, g := range n.holds {
		if g.owner == h.owner && g.slot == h.slot && g.gen == h.gen && !g.since.After(end) && (g.live() || !g.doneSeen.Before(h.since)) &&
			(g == h || g.unlockCalled.IsZero() || !g.unlockCalled.Before(h.since)) {
			siblings = append(siblings, g)
		}
	}
	for _, g := range siblings {
		cap := func(t time.Time) time.Time {
			if !g.live() || g == h {
				if v := g.h.ValidUntil(); v.Before(t) {
					return v
				}
			}
			return t
		}
		if !g.asked.IsZero() {
			raise(cap(g.asked.Add(g.grantLease-drift(g.grantLease))), fmt.Sprintf("the acquisition of token %d (lease %v) asked at %s", g.h.Token(), g.grantLease, g.asked.Format("15:04:05.000")))
		}
		if !g.extendedTo.IsZero() {
			raise(cap(g.extendedTo), fmt.Sprintf("an Extend of token %d", g.h.Token()))
		}
	}
	// renewing: a watchdog acquisition of the owner kept its registration
	// from before from until after to: a renewal is applied only if the
	// registration it carried is still the hold's when its reply arrives
	// (unlocking the last watchdog acquisition cancels it).
	renewing := func(from, to time.Time) bool {
		for _, g := range siblings {
			if !g.leased && !g.granted().After(from) && (g.unlockCalled.IsZero() || !g.unlockCalled.Before(to)) {
				return true
			}
		}
		return false
	}
	var calls []renewCall
	if h.renews != nil {
		calls = h.renews.of(n.name, h.owner)
	}
	for _, r := range calls {
		if r.ok && !r.done.Add(c.applyLag).After(end) && renewing(r.sent, r.done.Add(c.applyLag)) {
			raise(r.sent.Add(L-drift(L)), fmt.Sprintf("a renewal sent %s, confirmed %s", r.sent.Format("15:04:05.000"), r.done.Format("15:04:05.000")))
		}
	}
	if end.Before(bound.Add(-c.sendSlack)) {
		fail(early, "%s made it valid until %s (%v later)", by, bound.Format("15:04:05.000"), bound.Sub(end))
		return
	}
	// Rule 3. The renewals that could have kept it: sent in the lease
	// before its end, while the watchdog had it. A grant that came back
	// with less than a renewal period of its lease left (its acquisition
	// was held up) is lost before any renewal is due; a hold no watchdog
	// acquisition kept registered over that lease (LeaseTime ones) is
	// lost at the end of its lease.
	from := end.Add(-(L - drift(L)))
	for _, g := range siblings {
		if !g.leased && g.since.After(from) && g.since.Before(end) && renewing(g.granted(), end) {
			from = g.since // registered once its grant came back
		}
	}
	if end.Sub(from) < L/3+c.applyLag || !renewing(from, end) {
		return
	}
	sent := 0
	for _, r := range calls {
		if r.sent.After(from.Add(-c.sendSlack)) && !r.sent.After(end) {
			sent++
		}
	}
	if sent > 0 || h.renews == nil || h.renews.heldUp(from, end, L/3) || m.pausedDuring(from, end, L/3) || m.stalledDuring(from, end) {
		return
	}
	fail("no loss of a renewed hold unless faults kept every renewal in its last lease from being confirmed (checkLoss rule 3)",
		"no renewal of it was sent in the lease before (from %s), and none of its runtime was held up", from.Format("15:04:05.000"))
}

// stalledDuring reports whether Redis was paused (CLIENT PAUSE WRITE)
// between from and to: renewals sent then wait for the pause to end.
func (m *model) stalledDuring(from, to time.Time) bool {
	for _, iv := range m.stalls {
		if iv.from.Before(to) && from.Before(iv.to) {
			return true
		}
	}
	return false
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
		if m.failedOwners[l.h.Owner] {
			continue // a failed round's: checkRounds judges it
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

// failedRound is a MultiLock or RedLock round that failed, whose members
// were acquired as owner, an id of the round's own.
type failedRound struct {
	what, owner string
	names       []*nameState
	slots       []int
	at          time.Time
}

// roundFailed registers r for checkRounds (m.mu held).
func (m *model) roundFailed(r *failedRound) {
	m.rounds = append(m.rounds, r)
	if m.failedOwners == nil {
		m.failedOwners = map[string]bool{}
	}
	m.failedOwners[r.owner] = true
}

// checkRounds: a MultiLock or RedLock round that failed leaves nothing
// held. Its members were acquired with an owner id of the round's own, so
// whatever Redis or a runtime's rt.Held() still has of that id is the
// round's: a member it took and released, or a grant that came back after
// it gave up (given back when it arrives). Within orphanBound of the
// failure, the bound every hold no caller has must be gone by, none is
// left. fields: each lock name's hash, read in this sweep.
func (m *model) checkRounds(fields map[string]map[string]string, listed []listedHold, now time.Time) {
	keep := m.rounds[:0]
	for _, r := range m.rounds {
		if now.Sub(r.at) <= m.orphanBound() {
			keep = append(keep, r)
			continue
		}
		for _, n := range r.names {
			if c := fields[n.name][r.owner]; c != "" {
				m.fail(invRound, n, []string{r.owner}, "%s round %s failed %.3fs ago (bound %v); Redis still counts %s for it on %s",
					r.what, r.owner, now.Sub(r.at).Seconds(), m.orphanBound(), c, n.name)
			}
		}
		for _, l := range listed {
			if l.h.Owner == r.owner {
				m.fail(invRound, m.names[l.h.Name], []string{r.owner}, "%s round %s failed %.3fs ago (bound %v); runtime %d still lists its hold of %s (token %d)",
					r.what, r.owner, now.Sub(r.at).Seconds(), m.orphanBound(), l.slot, l.h.Name, l.h.Token)
			}
		}
	}
	m.rounds = keep
}
