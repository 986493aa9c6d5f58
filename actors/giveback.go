package actors

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/scripts"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// Giving back holds nobody may use.
//
// Two kinds of hold may live on in Redis although no caller of ours can use
// them: a grant whose reply arrived after its local validity had passed
// (Redis was paused or slow: the caller could not know how long it still
// has), and a hold this runtime declared lost when its validity ran out
// without a confirmed renewal (a renewal still in flight may land after
// that and give it a fresh lease). Left alone, each keeps the name from
// everyone for up to a lease. Each is given back with a compare-and-release:
// only while Redis counts exactly the holds we knew of, and they are still
// the same holds: for a reentrant or fair lock, they carry the mark our
// grant that began them wrote (scripts.Grant.Mark), which their re-entries
// keep and nothing else writes; for a write, the fencing counter still
// holds the token last seen. So a newer hold of the same owner (a Redisson
// thread whose id a handle borrowed, another process), taken once ours
// were gone, is never touched, however late the give-back lands. The
// release is retried while it does not run, until the hold would have
// expired anyway.
//
// The same compare-and-release undoes a grant whose caller is gone, and a
// hand-off whose waiter gave up.
//
// While Redis work of an owner is unsettled (a give-back, or a run whose
// outcome is being settled: settleStep), nothing grants to that owner: its
// attempts are parked and resume when the work is done; so are its
// releases (a release meanwhile could release what the work acts on: a
// fresh hold a re-entry started after the lock was deleted, reported as an
// Unlock of the deleted one, or the hold a give-back tried again later
// expects to find), and while an attempt of it is in flight; hand-offs pass it
// by, and a grant that comes back meanwhile (its attempt was in flight
// when the work began) is given back too, not handed to its caller
// (attempted). A grant in between would let the give-back act on the
// newer hold: finding the count it expects in a hold granted since, it
// would delete it (two holders: ours, which believes it holds, and
// whoever takes the freed key). A give-back and a grant of one owner
// never overlap.

// giveBackGrant gives back a grant of r that its caller may not have: its
// reply came back after its local validity (the caller could not know how
// long it still has), or while a give-back of its owner was out. r goes on
// waiting if it may, or fails.
func (a *lockActor) giveBackGrant(ctx actor.Context, r *request, g scripts.Grant, why string) {
	a.giveBack(r.owner, r.write(), 1, g.HoldCount, g.Mark, r.leaseOr(a.env.Watchdog))
	waits := !r.tryOnce && (r.deadline.IsZero() || time.Now().Before(r.deadline))
	if waits && r.enqueued && a.queue.queued(r) && g.HoldCount == 1 {
		// A fair waiter's grant took its place at the head of the queue:
		// the give-back puts it back there, or it would lose its turn.
		a.queuedUndo(r.owner, r.write()).keep = a.placeWait(r)
	}
	if !waits {
		a.answer(ctx, r, AcquireResult{Err: sentinel.Op("acquire", a.key.Name, fmt.Errorf(
			"%w: %s, so it was given back", ErrNotAcquired, why)), HolderTTL: -1})
		return
	}
	if !a.queue.queued(r) || (a.fam.queues() && !r.enqueued) {
		// A re-entry or a single attempt, or a fair waiter that never
		// joined the Redis queue (its first attempt was this grant): run
		// again once the give-back is done (a fair waiter contends only
		// from its place in the queue, which this takes).
		a.steps = append(a.steps, &attemptStep{req: r})
		return
	}
	a.headReady = true
}

// abandonHold ends h as lost while Redis may still count its holds, and
// gives them back.
func (a *lockActor) abandonHold(ctx actor.Context, h *hold, why LossReason, reason string) {
	a.lost(ctx, h, why, reason)
	a.giveBackHold(h)
}

// giveBackHold gives back the holds of h, which was declared lost while
// Redis may still count them: as many as its grants here, while Redis
// counts what was last seen. An owner id given with WithOwner may be held
// through other runtimes too (Redis counts their holds with ours): theirs
// are not ours to give back.
func (a *lockActor) giveBackHold(h *hold) {
	lease := a.env.Watchdog
	for _, g := range h.grants {
		if g.lease > lease {
			lease = g.lease
		}
	}
	if n := h.granted(false); h.count > 0 && n > 0 {
		token := h.mark
		var keys []int64
		if a.fam.shares() {
			// The give-back checks the owner's newest read-hold key: ours,
			// the newest we know of. When we do not know every key (the
			// owner id reads through another runtime too), a newer one is
			// not ours, and the give-back is refused: by count alone it
			// could release a fresh hold of the id that counts as many.
			token = 0
			if n := len(h.reads); n > 0 {
				token = h.reads[n-1].token
			}
			if int64(len(h.reads)) == h.count {
				for _, k := range h.reads {
					keys = append(keys, k.token)
				}
			}
		}
		u := a.giveBack(h.owner, false, n, h.count, token, lease)
		u.readTokens, u.validTo = keys, epoch.Add(h.validUntil())
	}
	if n := h.granted(true); h.writes > 0 && n > 0 {
		a.giveBack(h.owner, true, n, h.writes, h.mark, lease).validTo = epoch.Add(h.validUntil())
	}
}

// giveBack queues, before anything else, the release of holds of owner
// (write: a read-write lock's write holds) if Redis still counts exactly
// ifCount of them and, when token is known (> 0), they are still the holds
// it names (scripts.Grant.Mark): not a fresh hold of the same owner id taken
// through another runtime or by a Redisson thread once ours were gone,
// whose holds Redis counts with ours. lease bounds how long it is retried:
// by then the holds have expired anyway. Give-backs run newest first
// (first; and however they wait, in the order runsBefore gives: by the
// count they expect): each is queued on a newer sight of the owner's
// count, so the one before it finds what it expects once the newer has
// run. A reentrant or fair lock's give-backs of one run of holds share its
// mark, whatever re-entered it since. A write's check is the fencing
// counter, which every newer grant moves: the older write give-backs
// expect the newer's token (a read's grant moves it too, or a late read
// under a lost write left the write's give-back refused, the write in
// Redis for the read's lease: RT35-1). A WithOwner id's older ones take
// it only if it is known (> 0) and its grant ran while their holds were
// surely in Redis (before validTo, as the token, the server's clock at the
// grant, shows): else it may have been a grant of a fresh hold of the id
// taken through another runtime once theirs expired (RT29-2), and with its
// token they would release that hold; left with their own, a re-entry that
// ran in time would strand them (RT30-1). An owner id this runtime made has
// no other holder (and a stale token would be refused until its hold
// expired).
func (a *lockActor) giveBack(owner string, write bool, holds, ifCount, token int64, lease time.Duration) *undoStep {
	a.settle(owner)
	if a.fam.shares() {
		for u := range a.undos {
			if u.owner == owner && u.write && (write || token > 0) && a.reenteredBy(u, token) {
				u.token = token
			}
		}
	}
	a.undoSeq++
	u := &undoStep{owner: owner, write: write, holds: holds, ifCount: ifCount, token: token, giveUpAt: time.Now().Add(lease + a.env.CallTimeout), seq: a.undoSeq}
	a.first(u)
	return u
}

// reenteredBy reports whether the grant whose fencing token is token (0:
// unknown) came while the write holds give-back u undoes were in Redis, so
// that the counter reading token is theirs: any grant of an owner id this
// runtime made, which nobody else holds; for a WithOwner id, a grant that
// ran while they were surely in Redis, by their local validity.
func (a *lockActor) reenteredBy(u *undoStep, token int64) bool {
	return a.ownID(u.owner) || token > 0 && a.env.Clock.IssuedBefore(token, u.validTo)
}

// giveBackUnknown gives back the one hold an attempt (or hand-off) of
// owner whose outcome stayed unknown may have granted, if Redis counts
// ifCount: no grant's token is known to check, so only for an owner id
// this runtime made, which nobody else uses. A WithOwner id may be held
// through other runtimes too (say, afresh once this grant expired, or
// before it if it never ran), and a give-back checked by count alone
// would release that hold, a re-entry's too (the other runtime may have
// re-entered to the same count): the grant, if there is one, expires
// within its lease instead.
func (a *lockActor) giveBackUnknown(owner string, write bool, ifCount int64, lease time.Duration) {
	if !a.ownID(owner) {
		a.env.Log.Warn("actorlock: a lock grant of unknown outcome is left to expire: its owner id (WithOwner) may be held through another runtime",
			slog.String("lock", a.key.Name), slog.String("owner", owner), slog.Duration("within", lease))
		return
	}
	a.giveBack(owner, write, 1, ifCount, 0, lease)
}

// ownID reports whether this runtime made owner id, which nobody else
// uses (not a WithOwner id).
func (a *lockActor) ownID(owner string) bool { return strings.HasPrefix(owner, a.env.RuntimeID+":") }

// queuedUndo is the earliest give-back of owner's holds on that side
// waiting to run, if any.
func (a *lockActor) queuedUndo(owner string, write bool) *undoStep {
	for _, list := range [2][]step{a.steps, a.parked} {
		for _, s := range list {
			if u, ok := s.(*undoStep); ok && u.owner == owner && u.write == write {
				return u
			}
		}
	}
	return nil
}

// undone follows a release of n holds of owner that ran after its hold
// here was given up (abandonHold) and its give-back queued: the give-back
// expects n holds fewer now, or nothing once the release freed the lock.
func (a *lockActor) undone(owner string, write bool, n int64, state scripts.UnlockState) {
	u := a.queuedUndo(owner, write)
	if u == nil || (state != scripts.Released && state != scripts.StillHeld) {
		return
	}
	u.holds, u.ifCount = max(u.holds, 1)-n, u.ifCount-n
	if !u.write && a.fam.shares() {
		// The release deleted the newest read-hold keys: the key the
		// give-back checks now is key ifCount (its token unknown: 0).
		u.token = 0
		if u.ifCount > 0 && u.ifCount <= int64(len(u.readTokens)) {
			u.token = u.readTokens[u.ifCount-1]
		}
	}
	if state == scripts.Released || u.holds <= 0 || u.ifCount <= 0 {
		drop := func(s step) bool { return s == step(u) }
		a.steps = slices.DeleteFunc(a.steps, drop)
		a.parked = slices.DeleteFunc(a.parked, drop)
		a.settled(owner)
	}
}

// settle marks Redis work of owner unsettled until settled is called for
// it: until then nothing grants to owner.
func (a *lockActor) settle(owner string) {
	if a.settling == nil {
		a.settling, a.attempting, a.unreleasing = map[string]int{}, map[string]int{}, map[string]int{}
	}
	a.settling[owner]++
}

// settled ends one piece of unsettled work of owner (done, or given up);
// after the last, the owner's parked attempts resume.
func (a *lockActor) settled(owner string) {
	if a.settling[owner]--; a.settling[owner] > 0 {
		return
	}
	delete(a.settling, owner)
	parked := a.parked[:0]
	for _, s := range a.parked {
		if ownerOf(s) == owner {
			a.steps = append(a.steps, s)
		} else {
			parked = append(parked, s)
		}
	}
	clear(a.parked[len(parked):])
	a.parked = parked
	a.headReady = true
}

// unparkUndos puts the give-backs of owner parked while a release of it
// was being settled (undoStep.start) back first, in their order: the
// release's outcome, applied next, moves what they expect (undone).
func (a *lockActor) unparkUndos(owner string) {
	var undos []step
	a.parked = slices.DeleteFunc(a.parked, func(s step) bool {
		u, ok := s.(*undoStep)
		if ok && u.owner == owner {
			undos = append(undos, s)
		}
		return ok && u.owner == owner
	})
	a.steps = append(undos, a.steps...)
}

// ownerOf is the owner of a parked step: an attempt's, a release's or a
// give-back's.
func ownerOf(s step) string {
	switch s := s.(type) {
	case *releaseStep:
		return s.owner
	case *undoStep:
		return s.owner
	}
	return s.(*attemptStep).req.owner
}

// settlingFor reports whether Redis work of owner is unsettled, so that
// nothing may grant to it now.
func (a *lockActor) settlingFor(owner string) bool { return a.settling[owner] > 0 }
