package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/messages"
	"github.com/actorlock/actorlock/scripts"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// Extend asks a lock actor to make a Go caller's LeaseTime hold last at
// least Lease from now (Held.Extend).
type Extend struct {
	Key   LockKey
	Owner string
	ID    uint64 // the Acquire's ID
	Lease time.Duration
	Reply chan<- error // buffered: the actor never blocks on it
}

func (m *Extend) lockKey() LockKey { return m.Key }

// extendDone is the outcome of an Extend's script.
type extendDone struct {
	m      *Extend
	count  int64 // the owner's hold count when the script was sent
	mark   int64 // and what a give-back of them checks (hold.mark)
	ours   int64 // and how many of those holds this runtime granted
	sentAt time.Time
	held   bool
	err    error
}

// onExtend serves Extend and its outcome.
func (a *lockActor) onExtend(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case *Extend:
		a.extend(m)
	case *extendDone:
		a.extended(ctx, m)
	}
}

// extend checks that m names a LeaseTime hold of this actor and runs the
// extension off the actor.
func (a *lockActor) extend(m *Extend) {
	if a.key.Kind != messages.Kind_KIND_LOCK && a.key.Kind != messages.Kind_KIND_FAIR {
		m.Reply <- fmt.Errorf("%w: Extend supports Lock and FairLock holds, not %v", ErrInvalidArgument, a.key.Kind)
		return
	}
	h, g := a.goGrant(m.Owner, m.ID)
	switch {
	case g == nil:
		m.Reply <- lostError("the hold ended before this extension")
		return
	case g.release != nil:
		m.Reply <- fmt.Errorf("%w: an Unlock of this hold is under way", ErrUnlocked)
		return
	case h.watchdogs > 0:
		// The watchdog renews the owner's key to its own lease; a second
		// schedule would make neither the lease callers asked for.
		m.Reply <- fmt.Errorf("%w: Extend is for holds acquired with LeaseTime; this hold is renewed by the watchdog", ErrInvalidArgument)
		return
	}
	name, rdb, count, mark, ours := a.key.Name, a.env.Redis, h.count, h.mark, h.granted(false)
	a.extending++
	a.env.goCall(a.self, func(ctx context.Context) any {
		d := &extendDone{m: m, count: count, mark: mark, ours: ours, sentAt: time.Now()}
		d.held, d.err = scripts.ExtendLock(ctx, rdb, name, m.Owner, m.Lease)
		return d
	})
}

// extended moves the hold's local validity deadline as renewals do (from
// when the script was sent, minus drift; never back), or reports the hold
// lost if Redis no longer has it.
func (a *lockActor) extended(ctx actor.Context, d *extendDone) {
	a.extending--
	h, g := a.goGrant(d.m.Owner, d.m.ID)
	switch {
	case d.err != nil:
		d.m.Reply <- sentinel.Op("extend", a.key.Name, d.err)
	case g == nil:
		if d.held {
			// Close releases the holds unconditionally, while they are
			// surely in Redis: longer if this extension lengthened them,
			// which its reply proves only if it came before that time.
			// After it, the script may have met a fresh hold of the
			// WithOwner id taken through another runtime, and extended
			// that one (RT28-1).
			a.keepDrains(d.m.Owner, time.Now(), d.sentAt.Add(d.m.Lease-Drift(d.m.Lease)))
		}
		if d.held && a.holds.get(d.m.Owner) == nil && a.drainOf(d.m.Owner, false) == nil && !a.extendUndos(d.m.Owner, false, d.m.Lease) {
			// The hold's local deadline passed while the script ran, a
			// moment before Redis would have expired it, and the script
			// extended it: give back what nobody here holds any more
			// (when the count is still what it was; see giveback.go): our
			// grants, not what the owner id holds through other runtimes;
			// unless a drain (Close) releases them already, or the hold's
			// own give-back (abandonHold) is still out: it gives them
			// back on a newer sight of the owner's count than
			// this script's, which queued after it would pass for the
			// newest (RT23-3); it is now tried for as long as this
			// extension keeps them (RT25-2).
			a.giveBack(d.m.Owner, false, d.ours, d.count, d.mark, d.m.Lease)
		}
		d.m.Reply <- lostError("the hold ended during this extension")
	case !d.held:
		a.lost(ctx, h, LossGone, "extending found the lock gone")
		d.m.Reply <- lostError("extending found the lock gone")
	case since() >= h.validUntil():
		// The reply came after the hold's validity (its timer has not
		// fired yet): the script may have met a fresh hold of a
		// WithOwner id. The hold ends at its validity as it would have.
		d.m.Reply <- lostError("the hold's validity ended before this extension was confirmed")
	default:
		h.extend(d.sentAt.Add(d.m.Lease - Drift(d.m.Lease)))
		a.armValidity()
		d.m.Reply <- nil
	}
}

// goGrant finds the hold of owner and its grant to the Go Acquire id.
func (a *lockActor) goGrant(owner string, id uint64) (*hold, *grant) {
	h := a.holds.get(owner)
	if h == nil || h.byMessage() {
		return h, nil
	}
	for _, g := range h.grants {
		if g.goID == id && g.ended == nil {
			return h, g
		}
	}
	return h, nil
}
