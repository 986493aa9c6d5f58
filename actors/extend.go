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
	name, rdb := a.key.Name, a.env.Redis
	a.extending++
	a.env.goCall(a.self, func(ctx context.Context) any {
		d := &extendDone{m: m, sentAt: time.Now()}
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
		if d.held {
			// The grant ended here while the script ran, and what ended it
			// releases its holds in Redis: its Unlock, its hold's give-back
			// (abandonHold) or Close's drain. Redis runs one script at a
			// time: if that release ran after this script, it released
			// what the script extended; if before, the script extended
			// holds that are not ours (the WithOwner id's through another
			// runtime, or a Redisson thread's), which a give-back of its
			// own would release once a re-entry made the count what it
			// saw (RT38-1; RT17-1 before the holds' mark). What still has
			// to run is tried for as long as the extension keeps the holds
			// (RT25-2).
			a.extendUndos(d.m.Owner, false, d.m.Lease)
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
