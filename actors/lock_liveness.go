package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlock/actorlock/internal/ext"
	"github.com/actorlock/actorlock/messages"
)

// Owner actors.
//
// A local owner actor (or requester) is watched: when it stops, everything
// it held or waited for is released at once.
//
// An owner actor in another process is watched like a local one, but a
// watch alone cannot tell a frozen node or a cut network from a quiet one,
// and its Terminated can be forged by any peer. So the owner proves it is
// alive with RenewRequests (its token says who it is): a remote owner's
// watchdog holds are released when none came for a whole watchdog lease,
// whatever else happens, and the watchdog renews them in Redis only until
// then. Requesters still waiting need no RenewRequest (they may not have
// their token yet), except after a Terminated.
//
// Sending to a remote PID (a reply, a LockLost, a Watch) hands the message
// to protoactor's endpoint actors without network I/O here; only the first
// message to a new address waits for protoactor's endpoint supervisor to
// spawn them (the connection is then made by the endpoint's own actor).
// Nothing more is sent to a node whose connection broke (unreachable):
// each send would make protoactor dial it again.

// localAddress is protoactor's address of a system without remote.
const localAddress = ext.LocalAddress

// isLocal reports whether pid is an actor of this process. A peer may
// claim a local PID as its sender; it then gets a local owner's rules: its
// hold lasts while that local actor lives (at once released if there is
// none), which gains it nothing over renewing its own hold.
func (a *lockActor) isLocal(pid *actor.PID) bool { return isLocalPID(a.env.System, pid) }

// ownerStopped handles a Terminated for an owner actor or requester, judged
// by the rule of every actor (watchers.terminated): an actor of this
// process that is gone releases everything it held or waited for at once;
// for a remote actor see remoteStopped.
func (a *lockActor) ownerStopped(ctx actor.Context, m *actor.Terminated) {
	who := m.Who
	k := pidKey(who)
	switch a.watched.terminated(a.env.System, m) {
	case notWatched:
		return
	case remoteEnded:
		a.remoteStopped(who, m.Why == actor.TerminatedReason_AddressTerminated)
		return
	}
	for _, r := range a.queue.pending {
		if from := r.from(); from != nil && pidKey(from) == k {
			r.by = nil // nobody to tell
			a.forget(r)
			if !r.inflight {
				a.leaveIfQueued(r, false)
			}
		}
	}
	for h := range a.holds.all {
		if from := h.from(); from != nil && pidKey(from) == k {
			a.releaseAll(h, lostError("the owner actor stopped"))
		}
	}
}

// remoteStopped handles a Terminated for a remote actor: it stopped, or
// the connection to its node broke (unreachable). Forged or not, it only
// brings the liveness deadline of that actor's holds and requests forward
// to half a lease from now: an owner whose RenewRequests keep coming (one
// is due every lease/3) keeps its locks, and one that really stopped loses
// them in half a lease instead of a whole one.
func (a *lockActor) remoteStopped(who *actor.PID, unreachable bool) {
	k := pidKey(who)
	until := time.Now().Add(a.env.Watchdog / 2)
	for _, r := range a.queue.pending {
		if c := r.actor(); c != nil && c.from != nil && pidKey(c.from) == k {
			if c.suspectUntil.IsZero() || until.Before(c.suspectUntil) {
				c.suspectUntil = until
			}
			c.unreachable = c.unreachable || unreachable
		}
	}
	for h := range a.holds.all {
		if from := h.from(); from != nil && pidKey(from) == k {
			o := h.by
			o.suspect = true
			if o.aliveUntil.IsZero() || until.Before(o.aliveUntil) {
				o.aliveUntil = until
			}
			o.unreachable = o.unreachable || unreachable
		}
	}
	a.armAlive()
}

// renewMessage takes a RenewRequest as the proof that the owner of its
// token is alive: its holds are kept (and renewed by the watchdog) for
// another lease, and its waiting requests are no longer suspect. The
// response's lease is how long the owner may count on its hold from now:
// what is left of the hold's validity (a fixed lease, lease_ms, is never
// renewed; a watchdog hold is valid from its last renewal), never more than
// the watchdog lease. The owner's keeper must give up before the runtime can
// let another owner in, whatever the lease kind.
func (a *lockActor) renewMessage(ctx actor.Context, m *messages.RenewRequest) {
	refuse := func(err error) {
		ctx.Respond(&messages.RenewResponse{RequestId: m.RequestId, Error: protoError(err)})
	}
	owner, err := OwnerOfToken(a.env.RuntimeID, m.OwnerToken)
	switch {
	case err != nil:
		refuse(err)
		return
	case !a.knows(owner, func(g *grant) bool { return g.write == (m.Kind == messages.Kind_KIND_WRITE) }):
		// Of the kind it renews: a keeper of a read an outlived ended
		// (its write released meanwhile) learns it here, if the LockLost
		// could not reach it.
		refuse(fmt.Errorf("%w: that owner_token holds or awaits nothing of lock %q (kind %v) here", ErrNotOwner, a.key.Name, m.Kind))
		return
	}
	lease := a.env.Watchdog
	h := a.holds.get(owner)
	if h != nil && h.by != nil && h.by.remote {
		h.by.aliveUntil = time.Now().Add(a.env.Watchdog)
		h.by.suspect, h.by.unreachable = false, false
	}
	if h != nil && len(h.grants) > 0 {
		// deadline, not the validity a release's cut may have put in the
		// past: the grants that release releases wait for its outcome.
		lease = min(lease, max(h.deadline()-since(), 0))
	}
	for _, r := range a.queue.pending {
		if c := r.actor(); c != nil && r.owner == owner {
			c.suspectUntil, c.unreachable = time.Time{}, false
		}
	}
	ctx.Respond(&messages.RenewResponse{RequestId: m.RequestId, Renewed: true, LeaseMs: lease.Milliseconds()})
}

// knows reports whether owner holds (a grant that has not ended, of the
// side, if given) or waits for the lock here by message.
func (a *lockActor) knows(owner string, side func(*grant) bool) bool {
	held := func(g *grant) bool { return g.ended == nil && (side == nil || side(g)) }
	if h := a.holds.get(owner); h != nil && h.byMessage() && h.find(held) != nil {
		return true
	}
	for _, r := range a.queue.pending {
		if r.actor() != nil && r.owner == owner {
			return true
		}
	}
	return false
}

// liveness reports whether h is released when aliveUntil passes.
func (h *hold) liveness() bool {
	return h.by != nil && h.by.remote && (h.watchdogs > 0 || h.by.suspect) && !h.by.aliveUntil.IsZero()
}

// armAlive keeps one timer at the earliest liveness deadline, moved with
// every RenewRequest; if it fires early, expireOwners re-arms it.
func (a *lockActor) armAlive() {
	var earliest time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (earliest.IsZero() || t.Before(earliest)) {
			earliest = t
		}
	}
	for h := range a.holds.all {
		if h.liveness() {
			consider(h.by.aliveUntil)
		}
	}
	for _, r := range a.queue.pending {
		if c := r.actor(); c != nil {
			consider(c.suspectUntil)
		}
	}
	if !earliest.IsZero() {
		if a.alive == nil {
			a.alive = &deadline{}
		}
		a.alive.moveTo(a.env.System.Root, a.self, earliest)
	}
}

// expireOwners gives up on the remote owners that did not prove alive in
// time: their waiting requests are forgotten, their holds released (and
// their owner actors told, if reachable).
func (a *lockActor) expireOwners(ctx actor.Context) {
	now := time.Now()
	for _, r := range a.queue.pending {
		if c := r.actor(); c != nil && !c.suspectUntil.IsZero() && !now.Before(c.suspectUntil) {
			a.watched.unwatch(ctx, c.from)
			r.by = nil // nobody to tell
			a.forget(r)
			if !r.inflight {
				a.leaveIfQueued(r, false)
			}
		}
	}
	for h := range a.holds.all {
		if h.liveness() && !now.Before(h.by.aliveUntil) {
			reason := fmt.Sprintf("no RenewRequest from the remote owner for %v", a.env.Watchdog)
			if h.by.suspect {
				reason = "the remote owner actor stopped or its connection broke, and no RenewRequest came since"
			}
			a.abandon(ctx, h, reason)
		}
	}
	a.armAlive()
}

// abandon releases every hold of a remote owner that stopped proving it
// is alive, and tells it so if it can be reached.
func (a *lockActor) abandon(ctx actor.Context, h *hold, reason string) {
	var token int64
	for _, g := range h.grants {
		token = max(token, g.token)
	}
	a.tellLost(ctx, h, h.writes > 0, reason, token)
	a.watched.unwatch(ctx, h.from())
	h.by.aliveUntil, h.by.suspect = time.Time{}, false
	a.releaseAll(h, lostError(reason))
}
