package actors

import (
	"fmt"
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
// only while Redis counts exactly the holds we knew of, so a newer hold of
// the same owner (a Redisson thread whose id a handle borrowed, another
// process) is never touched. The release is retried while Redis does not
// answer, until the hold would have expired anyway.
//
// The same compare-and-release undoes an attempt whose outcome is unknown
// or whose caller is gone, and a hand-off whose waiter gave up.
//
// While Redis work of an owner is unsettled (a give-back, or a release
// whose outcome is unknown and that the actor tries again: see
// releaseFailed), nothing grants to that owner: its attempts are parked and
// resume when the work is done, and hand-offs pass it by. A grant in
// between would let the unsettled script act on the newer hold: a
// give-back finding the count it expects in a hold granted since would
// delete it (two holders: ours, which believes it holds, and whoever takes
// the freed key), and a release retry finding the fencing counter moved by
// a re-entry would report the hold released while it stays.

// lateGrant handles a grant of r whose reply came back after its local
// validity: it is given back, and r goes on waiting if it may, or fails.
func (a *lockActor) lateGrant(ctx actor.Context, r *request, g scripts.Grant, lease time.Duration) {
	a.giveBack(r.owner, r.write(), 1, g.HoldCount, lease)
	if r.tryOnce || (!r.deadline.IsZero() && !time.Now().Before(r.deadline)) {
		a.answer(ctx, r, AcquireResult{Err: sentinel.Op("acquire", a.key.Name, fmt.Errorf(
			"%w: the grant came back after its lease had run out (Redis was slow to answer), so it was given back",
			ErrNotAcquired)), HolderTTL: -1})
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
// Redis may still count them.
func (a *lockActor) giveBackHold(h *hold) {
	lease := a.env.Watchdog
	for _, g := range h.grants {
		if g.lease > lease {
			lease = g.lease
		}
	}
	if h.count > 0 {
		a.giveBack(h.owner, false, h.count, h.count, lease)
	}
	if h.writes > 0 {
		a.giveBack(h.owner, true, h.writes, h.writes, lease)
	}
}

// giveBack queues, before anything else, the release of holds of owner
// (write: a read-write lock's write holds) if Redis still counts exactly
// ifCount of them. lease bounds how long it is retried: by then the holds
// have expired anyway.
func (a *lockActor) giveBack(owner string, write bool, holds, ifCount int64, lease time.Duration) {
	a.settle(owner)
	a.first(&undoStep{
		owner: owner, write: write, holds: holds, ifCount: ifCount,
		requestID: a.env.NewRequestID(),
		giveUpAt:  time.Now().Add(lease + a.env.CallTimeout),
	})
}

// settle marks Redis work of owner unsettled until settled is called for
// it: until then nothing grants to owner.
func (a *lockActor) settle(owner string) {
	if a.settling == nil {
		a.settling = map[string]int{}
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
		if s.req.owner == owner {
			a.steps = append(a.steps, s)
		} else {
			parked = append(parked, s)
		}
	}
	clear(a.parked[len(parked):])
	a.parked = parked
	a.headReady = true
}

// settlingFor reports whether Redis work of owner is unsettled, so that
// nothing may grant to it now.
func (a *lockActor) settlingFor(owner string) bool { return a.settling[owner] > 0 }
