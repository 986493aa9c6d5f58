package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/scripts"
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
// While a give-back of an owner is outstanding no attempt of that owner
// runs: it would re-enter the orphan (hold count 2 where the caller thinks
// 1) and leave it behind at Unlock. Such attempts are parked and resume when
// the give-back is done.

// lateGrant handles a grant of r whose reply came back after its local
// validity: it is given back, and r goes on waiting if it may, or fails.
func (a *lockActor) lateGrant(ctx actor.Context, r *request, g scripts.Grant, lease time.Duration) {
	a.giveBack(r.owner, r.write(), 1, g.HoldCount, lease)
	if r.tryOnce || (!r.deadline.IsZero() && !time.Now().Before(r.deadline)) {
		a.answer(ctx, r, AcquireResult{Err: fmt.Errorf(
			"%w: %q: the grant came back after its lease had run out (Redis was slow to answer), so it was given back",
			ErrNotAcquired, a.key.Name), HolderTTL: -1})
		return
	}
	if !a.queue.queued(r) {
		// A re-entry or a single attempt: run again once the give-back is done.
		a.steps = append(a.steps, &attemptStep{req: r})
		return
	}
	a.headReady = true
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
// ifCount of them. lease bounds how long it is retried.
func (a *lockActor) giveBack(owner string, write bool, holds, ifCount int64, lease time.Duration) {
	if a.givingBack == nil {
		a.givingBack = map[string]int{}
	}
	a.givingBack[owner]++
	a.first(&undoStep{
		giveBack: true, owner: owner, write: write, holds: holds, ifCount: ifCount,
		requestID: a.env.NewRequestID(),
		giveUpAt:  time.Now().Add(lease + a.env.CallTimeout),
	})
}

// gaveBack ends one outstanding give-back of owner (done, or given up);
// after the last, the owner's parked attempts resume.
func (a *lockActor) gaveBack(owner string) {
	if a.givingBack[owner]--; a.givingBack[owner] > 0 {
		return
	}
	delete(a.givingBack, owner)
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

// givingBackFor reports whether a give-back of owner is outstanding.
func (a *lockActor) givingBackFor(owner string) bool { return a.givingBack[owner] > 0 }
